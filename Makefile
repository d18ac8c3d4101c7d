# runbox build. `make` builds ./runbox, the probe and the minimal image; `make test` installs
# what is missing (Debian packages), builds and runs every test; `make demo` shows one run.

CC       ?= gcc
PKGS     := libseccomp libcap libmnl libnftnl jansson libarchive
# The libraries are shared by default, as a distribution links them: a security update of
# SQLite, libseccomp, libcap, libnftnl or jansson then needs no rebuild, and libseccomp's
# syscall table (which names the syscalls a profile may list) is the installed one, so a
# syscall newer than this build is still nameable. The loader costs each start its mappings,
# relocations and their page faults (docs/benchmarks.md has the before and after; a daemon
# pays it once). Two are kept static unless asked (docs/benchmarks.md, "Linking"):
# - libcrypto (LIBCRYPTO_STATIC=0 to share it): runbox takes only SHA-256, base64, cleanse and
#   memcmp from it, code OpenSSL's security fixes do not touch, while its shared library is
#   the one that costs: ~20k relocations and ~120 page faults at every start, several ms here.
#   Nothing may call its EVP or provider layer (see rb_hmac_sha256): shared or static, the
#   first fetch loads openssl.cnf and the providers.
# - libarchive (image import; LIBARCHIVE_STATIC=0 to share it): its shared library pulls in
#   libxml2, ICU, libstdc++ and nettle (11 more libraries at every start of every command);
#   static, only its tar reader, disk reader and filters come in, needing libzstd and libacl.
# STATIC_DEPS=1 links every library Debian ships an archive of statically (all but libmnl,
# libzstd, libacl and glibc's), for a host that measured it wants the start-up time back and
# rebuilds on every update of them.
STATIC_DEPS       ?= 0
LIBCRYPTO_STATIC  ?= 1
LIBARCHIVE_STATIC ?= 1
ifeq ($(STATIC_DEPS),1)
DEP_LIBS := -Wl,-Bstatic -lcrypto -lsqlite3 -lseccomp -lcap -lnftnl -ljansson -larchive -llzma -lbz2 -lz \
            -Wl,-Bdynamic -lmnl -l:libzstd.so.1 -l:libacl.so.1 -ldl -lpthread -lm
else
DEP_STATIC := $(if $(filter 1,$(LIBARCHIVE_STATIC)),-larchive -llzma -lbz2 -lz) $(if $(filter 1,$(LIBCRYPTO_STATIC)),-lcrypto)
DEP_SHARED := $(if $(filter 1,$(LIBARCHIVE_STATIC)),-l:libzstd.so.1 -l:libacl.so.1,-larchive) \
              $(if $(filter 1,$(LIBCRYPTO_STATIC)),,-lcrypto) -lsqlite3 -lseccomp -lcap -lmnl -lnftnl -ljansson
BSTATIC  := -Wl,-Bstatic
BDYNAMIC := -Wl,-Bdynamic
DEP_LIBS := $(if $(strip $(DEP_STATIC)),$(BSTATIC) $(DEP_STATIC) $(BDYNAMIC)) $(DEP_SHARED) -ldl -lpthread -lm
endif
B        := build
# format-truncation is off: bounded snprintf into PATH_MAX buffers is the idiom here, and
# paths that do not fit are rejected where it matters (rb_paths_init, run dirs).
WARN     := -Wall -Wextra -Werror -Wformat=2 -Wshadow -Wno-unused-parameter -Wno-format-truncation
HARDEN   := -fstack-protector-strong -D_FORTIFY_SOURCE=2 -fPIE
CFLAGS   ?= -O2 -g
CFLAGS   += -std=gnu17 $(WARN) $(HARDEN) -I. -MMD -MP
LDFLAGS  += -pie -Wl,-z,relro,-z,now
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(DEP_LIBS)
SAN      := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

# Library sources: everything in the components except the two mains and the HTTP endpoint,
# which only runbox-gateway links (libmicrohttpd loads a TLS library: ~12 ms per start).
GW_SRCS  := gateway/endpoint.c gateway/cpushare.c gateway/connector.c gateway/curlpool.c gateway/workers.c gateway/tunnel.c gateway/dns.c gateway/mcp.c gateway/sse.c gateway/daemon.c gateway/grant.c gateway/record.c
GW_MAIN  := gateway/serve_main.c
# A build-time tool, not the library: writes the scrubber's tables (SCRUB_TABLES below).
SCRUB_GEN := scrub/tables_main.c
# runbox serve's daemon: its own binary, linking libmicrohttpd, so runbox's start stays lean.
SV_SRCS  := serve/inflight.c serve/sessions.c serve/restart.c serve/http.c serve/files.c serve/fsroot.c serve/fsops.c serve/snapshot.c serve/pool.c serve/quota.c serve/keys.c serve/ports.c serve/approvals.c
SV_SRCS  += serve/manifest.c serve/resume.c serve/known.c
# the E2B-compatible front end (docs/e2b.md)
SV_SRCS  += serve/e2b_http.c serve/e2b_control.c serve/e2b_envd.c serve/e2b_fs.c serve/e2b_connect.c serve/e2b_keys.c serve/e2b_main.c
SV_MAIN  := serve/serve_main.c
LIB_SRCS := $(sort $(filter-out $(GW_SRCS) $(GW_MAIN) $(SCRUB_GEN),$(wildcard common/*.c ledger/*.c scrub/*.c runtime/*/*.c policy/*.c images/*.c gateway/*.c cli/cmd_*.c cli/term.c cli/progress.c)))
MAIN_SRC := cli/main.c
# The scrubber's format and keyword tables as constants, written by scrub/tables_main.c from
# rb_scrub_rules_init (no run builds them): a library source made at build time.
SCRUB_TABLES := $(B)/gen/scrub_tables.c
LIB_OBJS := $(LIB_SRCS:%.c=$(B)/obj/%.o) $(SCRUB_TABLES:%.c=$(B)/obj/%.o)
SAN_OBJS := $(LIB_SRCS:%.c=$(B)/asan/%.o) $(SCRUB_TABLES:%.c=$(B)/asan/%.o) $(GW_SRCS:%.c=$(B)/asan/%.o)
GW_LIBS  := $(shell pkg-config --libs libmicrohttpd libcurl 2>/dev/null)
UNIT_SRCS := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(B)/unit/%)
PROBE    := $(B)/probe
MINIMAL  := $(B)/images/minimal/rootfs

.PHONY: all deps test unit integration vmtest demo bench lint clean fuzz
# The sanitizer objects are intermediates of the unit binaries: kept, so they are not rebuilt.
.SECONDARY:
all: runbox runbox-gateway runbox-serve $(PROBE) $(B)/images/minimal/.built

deps:
	@scripts/install-deps.sh build

# The link line as a file, rewritten only when it changes: STATIC_DEPS=1 relinks.
.PHONY: FORCE
$(B)/link-libs: FORCE
	@mkdir -p $(B)
	@echo '$(DEP_LIBS) $(LDFLAGS)' | cmp -s - $@ || echo '$(DEP_LIBS) $(LDFLAGS)' >$@

# Linked aside and renamed, so a runbox that is running (tests, benchmarks) never blocks a build.
runbox: $(LIB_OBJS) $(B)/obj/$(MAIN_SRC:.c=.o) $(B)/link-libs
	$(CC) $(LDFLAGS) -o $@.tmp $(filter %.o,$^) $(PKG_LIBS)
	mv -f $@.tmp $@

runbox-gateway: $(LIB_OBJS) $(GW_SRCS:%.c=$(B)/obj/%.o) $(B)/obj/$(GW_MAIN:.c=.o) $(B)/link-libs
	$(CC) $(LDFLAGS) -o $@.tmp $(filter %.o,$^) $(PKG_LIBS) $(GW_LIBS)
	mv -f $@.tmp $@

# The daemon writes tar (snapshots): libarchive's writers come in as one table (xar, mtree: libxml2,
# nettle), so it takes the shared library, first, loaded once per daemon rather than per command.
runbox-serve: $(LIB_OBJS) $(SV_SRCS:%.c=$(B)/obj/%.o) $(B)/obj/$(SV_MAIN:.c=.o) $(B)/link-libs
	$(CC) $(LDFLAGS) -o $@.tmp $(filter %.o,$^) -l:libarchive.so.13 $(PKG_LIBS) $(GW_LIBS)
	mv -f $@.tmp $@

$(SCRUB_TABLES): $(SCRUB_GEN) scrub/rules.c scrub/keyword.c scrub/prefilter.c $(wildcard scrub/*.h) common/error.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu17 -O1 -I. $(PKG_CFLAGS) -o $(B)/gen/scrub_tables_main $(filter %.c,$^) -lm
	$(B)/gen/scrub_tables_main $@.tmp && mv -f $@.tmp $@

$(B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -c -o $@ $<

$(B)/asan/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -U_FORTIFY_SOURCE $(PKG_CFLAGS) -c -o $@ $<

$(B)/unit/%: tests/unit/%.c $(SAN_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -U_FORTIFY_SOURCE $(PKG_CFLAGS) -o $@ $(filter %.c %.o,$^) $(PKG_LIBS) $(GW_LIBS) -lcmocka
# runbox serve's path handling, outside the library.
$(B)/unit/test_fsroot: $(B)/asan/serve/fsroot.o
# Its keys, and the session ids it answers for.
$(B)/unit/test_keys: $(B)/asan/serve/keys.o
$(B)/unit/test_known: $(B)/asan/serve/known.o $(B)/asan/serve/quota.o

# The E2B front end's framing and keys (serve/, outside the library).
$(B)/unit/test_e2b: $(B)/asan/serve/e2b_connect.o $(B)/asan/serve/e2b_keys.o $(B)/asan/serve/e2b_main.o

# The in-sandbox probe: static, so it runs in any image; its exit code is the errno it met.
$(PROBE): tests/probe/probe.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu17 -O2 -Wall -Wextra -Werror -Wno-unused-parameter -static -o $@ $<

# The stamp sits beside the rootfs, not in it: nothing of the build shows inside a sandbox.
$(B)/images/minimal/.built: images/minimal/build.sh $(PROBE)
	images/minimal/build.sh $(MINIMAL) $(PROBE)
	@touch $@

# make install [PREFIX=/usr/local] [DESTDIR=]: the layout rb_parts_find (common/paths.c)
# finds from the installed binary, so only PREFIX moves it (bin/, libexec/runbox/ and
# share/runbox/ stay side by side below it). The minimal image keeps its owners (root).
PREFIX ?= /usr/local
IDIR    = $(DESTDIR)$(PREFIX)
MAN1    := $(wildcard man/*.1)
.PHONY: install uninstall
install: all
	install -d $(IDIR)/bin $(IDIR)/libexec/runbox $(IDIR)/share/runbox/policy/profiles \
		$(IDIR)/share/runbox/policy/seccomp $(IDIR)/share/runbox/images/minimal $(IDIR)/share/man/man1
	install -m 0755 runbox $(IDIR)/bin/runbox
	install -m 0755 runbox-gateway $(IDIR)/libexec/runbox/runbox-gateway
	install -m 0755 runbox-serve $(IDIR)/libexec/runbox/runbox-serve
	install -m 0644 policy/profiles/*.json $(IDIR)/share/runbox/policy/profiles/
	install -m 0644 policy/seccomp/*.json $(IDIR)/share/runbox/policy/seccomp/
	rm -rf $(IDIR)/share/runbox/images/minimal/rootfs $(IDIR)/share/runbox/images/minimal/.built
	cp -a $(MINIMAL) $(IDIR)/share/runbox/images/minimal/rootfs
	touch $(IDIR)/share/runbox/images/minimal/.built
	install -m 0644 $(MAN1) $(IDIR)/share/man/man1/

uninstall:
	rm -f $(IDIR)/bin/runbox $(IDIR)/libexec/runbox/runbox-gateway $(IDIR)/libexec/runbox/runbox-serve $(MAN1:man/%=$(IDIR)/share/man/man1/%)
	rm -rf $(IDIR)/share/runbox
	-rmdir $(IDIR)/libexec/runbox

test: test-sdk
	@scripts/install-deps.sh build test vm
	@$(MAKE) --no-print-directory -j$$(nproc) all $(UNIT_BINS) $(FUZZ_REPLAY) $(MCP_JS)/node_modules/.package-lock.json
	@tests/run-all.sh

# runbox serve's E2B API with the real e2b SDK (tests/e2b; part of `make test` as
# tests/integration/e2b.sh, which runs `npm ci` only when node_modules is missing or stale).
.PHONY: test-e2b
test-e2b: all
	@scripts/install-deps.sh build test
	@tests/run-all.sh tests/integration/e2b.sh

# The seed's three jobs as shipped skills (docs/examples/skills) on the agent image
# (tests/skills/skills.sh). The agent image is built once into $(B)/agent-state when missing:
# that needs Debian's mirror and takes about 20 minutes on a loaded 2-core machine.
.PHONY: test-skills
AGENT_STATE := $(abspath $(B))/agent-state
test-skills: all
	@scripts/install-deps.sh build test
	@RUNBOX_STATE_DIR=$(AGENT_STATE) ./runbox image inspect agent >/dev/null 2>&1 || \
		RUNBOX_STATE_DIR=$(AGENT_STATE) ./runbox image build images/recipes/agent.json --name agent
	@RBX_AGENT_STATE=$(AGENT_STATE) tests/run-all.sh tests/skills/skills.sh

unit: $(UNIT_BINS)
	@tests/run-all.sh unit

integration: all
	@tests/run-all.sh integration

vmtest: all
	@tests/run-all.sh vm

demo:
	@scripts/install-deps.sh build
	@$(MAKE) --no-print-directory all
	@scripts/demo.sh

bench:
	@scripts/install-deps.sh build bench
	@$(MAKE) --no-print-directory all
	@bench/run.sh

# The MCP door's tests (tests/mcp: the pinned @modelcontextprotocol/sdk): `npm ci` only when
# node_modules is missing or older than the lock (tests/integration/gwmcp.sh checks the same).
MCP_JS := tests/mcp
$(MCP_JS)/node_modules/.package-lock.json: $(MCP_JS)/package.json $(MCP_JS)/package-lock.json
	cd $(MCP_JS) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# The OpenAI Agents SDK client (sdk/js): `npm ci` only when its lock changed, tsc, then its
# node:test suites against a real `runbox serve` (docs/sdk.md). Part of `make test`.
SDK_JS := sdk/js
.PHONY: test-sdk bench-serve bench-serve-sdk bench-serve-host
$(SDK_JS)/node_modules/.ci-stamp: $(SDK_JS)/package.json $(SDK_JS)/package-lock.json
	@scripts/install-deps.sh sdk
	cd $(SDK_JS) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@
$(SDK_JS)/dist/.built: $(SDK_JS)/node_modules/.ci-stamp $(SDK_JS)/tsconfig.json $(wildcard $(SDK_JS)/src/*.ts $(SDK_JS)/test/*.ts $(SDK_JS)/bench/*.ts)
	rm -rf $(SDK_JS)/dist
	cd $(SDK_JS) && npx --no-install tsc -p .
	@touch $@
test-sdk:
	@scripts/install-deps.sh build sdk
	@$(MAKE) --no-print-directory all $(SDK_JS)/dist/.built
	cd $(SDK_JS) && node --test --test-concurrency=1 dist/test/*.test.js

# The SDK part of bench-serve: one scripted SandboxAgent run on runbox and on the SDK's
# UnixLocalSandboxClient, side by side (not in make test).
bench-serve: bench-serve-sdk
bench-serve-sdk:
	@scripts/install-deps.sh build sdk
	@$(MAKE) --no-print-directory all $(SDK_JS)/dist/.built
	@$(SDK_JS)/bench/sdk-run.sh

# runbox serve through the E2B SDK: create to the first command's end, commands.run('true'),
# against the native API in the same run (bench/serve_e2b.mjs); not in make test.
.PHONY: bench-serve-e2b
bench-serve: bench-serve-e2b
bench-serve-e2b: all
	@scripts/install-deps.sh build test
	@bench/serve_e2b.sh

# runbox serve against the host: round trip, create cold and pooled, memory per idle session
# (bench/serve.sh, docs/benchmarks.md); not in make test.
bench-serve: bench-serve-host
bench-serve-host:
	@$(MAKE) --no-print-directory all
	@bench/serve.sh
# The gateway's added latency and calls/s per connector call, and CONNECT against tinyproxy
# (bench/gateway.sh, which installs tinyproxy when missing); not in make test.
.PHONY: bench-gateway
bench-gateway: runbox-gateway
	@bench/gateway.sh

# The image store against its peers in the same run: import against tar -x, a run's start on a
# store image against the same tree as a directory, the first run after an import (bench/images.sh).
.PHONY: bench-images
bench-images:
	@scripts/install-deps.sh build bench
	@$(MAKE) --no-print-directory all
	@bench/images.sh

# The scrubber's recall per family, false positives and MB/s (bench/scrub_eval.sh); not in make test.
.PHONY: bench-scrub
bench-scrub:
	@bench/scrub_eval.sh

# Every warning fails: clang-tidy's through WarningsAsErrors in .clang-tidy, clang-format's
# through --Werror, cppcheck's through --error-exitcode.
LINT_SRCS := $(LIB_SRCS) $(MAIN_SRC) $(GW_SRCS) $(GW_MAIN) $(SV_SRCS) $(SV_MAIN) $(SCRUB_GEN)
LINT_HDRS := $(filter-out build/% tests/%,$(wildcard */*.h */*/*.h))
lint:
	@scripts/install-deps.sh build lint
	@$(MAKE) --no-print-directory $(LIB_OBJS) $(GW_SRCS:%.c=$(B)/obj/%.o) $(SV_SRCS:%.c=$(B)/obj/%.o)
	scripts/check-layout.sh $(B)/obj
	clang-format --dry-run --Werror $(LINT_SRCS) $(LINT_HDRS)
	clang-tidy --quiet $(LINT_SRCS) -- -std=gnu17 -I. $(PKG_CFLAGS)
	cppcheck --quiet --error-exitcode=1 --enable=warning,portability --inline-suppr -I. $(LINT_SRCS)

# Fuzz targets (tests/fuzz, docs/internals/fuzzing.md). `make fuzz` builds each with clang's libFuzzer
# and the sanitizers and runs it FUZZ_SECONDS; `make test` replays every kept corpus and
# regression input once through the same targets, built with gcc and a plain main.
FUZZ_TARGETS := policy manifest skill token scrub
FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_CFLAGS  := -std=gnu17 -I. -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined \
                -fno-sanitize-recover=undefined
FUZZ_BINS    := $(FUZZ_TARGETS:%=$(B)/fuzz/fuzz_%)
FUZZ_REPLAY  := $(FUZZ_TARGETS:%=$(B)/fuzz-replay/fuzz_%)

fuzz:
	@scripts/install-deps.sh build fuzz
	@$(MAKE) --no-print-directory -j$$(nproc) $(FUZZ_BINS)
	@FUZZ_SECONDS=$(FUZZ_SECONDS) tests/fuzz/run.sh $(FUZZ_TARGETS)

$(B)/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(PKG_CFLAGS) -c -o $@ $<

$(B)/fuzz/librunbox.a: $(LIB_SRCS:%.c=$(B)/fuzz/obj/%.o) $(SCRUB_TABLES:%.c=$(B)/fuzz/obj/%.o)
	rm -f $@ && ar rcs $@ $^

$(B)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(B)/fuzz/librunbox.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(PKG_CFLAGS) -o $@ $< $(B)/fuzz/librunbox.a $(PKG_LIBS)

$(B)/fuzz-replay/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/driver.c tests/fuzz/fuzz.h $(SAN_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -U_FORTIFY_SOURCE $(PKG_CFLAGS) -o $@ $(filter %.c %.o,$^) $(PKG_LIBS) $(GW_LIBS)

clean:
	rm -rf $(B) runbox runbox-gateway

-include $(shell find $(B) -path $(B)/agent-state -prune -o -name '*.d' -print 2>/dev/null)
