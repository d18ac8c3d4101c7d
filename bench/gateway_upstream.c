/* `make bench-gateway`'s upstream: an HTTP/1.1 server on 127.0.0.1 (libmicrohttpd, a pool of
 * threads over epoll) that answers every request 200 "ok", keep-alive, and counts the
 * connections it accepts. In C so that the upstream is not what bounds calls per second: the
 * direct row of the bench is its ceiling. Prints its port, then on each line read from stdin
 * the connections accepted so far; exits when stdin closes.
 * Usage: gateway_upstream THREADS */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_uint accepted;

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode code)
{
	(void)cls, (void)conn, (void)socket_ctx;
	if (code == MHD_CONNECTION_NOTIFY_STARTED)
		atomic_fetch_add(&accepted, 1);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *data, size_t *size, void **req_cls)
{
	(void)cls, (void)url, (void)method, (void)version, (void)data;
	if (!*req_cls) {
		*req_cls = conn; /* the headers: wait for the body's end */
		return MHD_YES;
	}
	if (*size) {
		*size = 0; /* a body is read and dropped */
		return MHD_YES;
	}
	struct MHD_Response *r = MHD_create_response_from_buffer(2, (void *)"ok", MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	enum MHD_Result ret = MHD_queue_response(conn, 200, r);
	MHD_destroy_response(r);
	return ret;
}

int main(int argc, char **argv)
{
	unsigned threads = argc > 1 ? (unsigned)atoi(argv[1]) : 2;
	struct sockaddr_in at = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct MHD_Daemon *d =
	    MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_TURBO, 0, NULL, NULL, on_request,
	                     NULL, MHD_OPTION_LISTENING_ADDRESS_REUSE, 1U, MHD_OPTION_THREAD_POOL_SIZE,
	                     threads ? threads : 1U, MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
	                     MHD_OPTION_CONNECTION_LIMIT, 1000U, MHD_OPTION_SOCK_ADDR, &at, MHD_OPTION_END);
	if (!d) {
		fprintf(stderr, "gateway_upstream: could not start\n");
		return 1;
	}
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	printf("%u\n", info ? info->port : 0);
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		printf("%u\n", atomic_load(&accepted));
		fflush(stdout);
	}
	MHD_stop_daemon(d);
	return 0;
}
