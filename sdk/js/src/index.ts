// @runbox/agents-sandbox: the OpenAI Agents SDK sandbox client for `runbox serve`.
export { RunboxSandboxClient } from './client.js';
export type { RunboxSandboxClientOptions, RunboxSessionOptions } from './client.js';
export { RunboxSandboxSession } from './session.js';
export type { RunboxSandboxSessionState } from './state.js';
export { RUNBOX_BACKEND_ID } from './state.js';
export { RunboxServeError } from './transport.js';
