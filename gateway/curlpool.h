/* One run's idle curl handles (an easy handle and its multi), kept per upstream key (the door and the connector, or the
 * proxied host:port) so that a call reuses the handle's open upstream connection (and TLS
 * session) instead of connecting anew. Used by gateway/connector.c; thread-safe. */
#ifndef RB_GATEWAY_CURLPOOL_H
#define RB_GATEWAY_CURLPOOL_H

#include <curl/curl.h>
#include <stdbool.h>

#define RB_GW_CURLPOOL_IDLE   32 /* idle handles kept at most, over all keys: each holds a socket */
#define RB_GW_CURLPOOL_IDLE_S 60 /* an idle handle older than this is closed, not reused */
#define RB_GW_CURLPOOL_KEY    320

struct rb_gw_curlpool;

/* A call's transfer: an easy handle and the multi handle it runs on, whose connection cache
 * holds its upstream connection between calls (a multi, so that the thread answering the
 * client can drive the transfer itself, gateway/connector.c). */
struct rb_gw_handle {
	CURL *easy;
	CURLM *multi;
};

/* NULL: out of memory. */
struct rb_gw_curlpool *rb_gw_curlpool_new(void);
/* Closes every idle handle (and its connections); none may be taken then. */
void rb_gw_curlpool_free(struct rb_gw_curlpool *p);

/* A handle for key's upstream: an idle one of key's (reset when it came back: no option of its
 * last call stays, neither URL, headers, credential, body nor callbacks; its connection cache
 * does), or a new one. A handle only ever serves one key, so a connection opened for one
 * connector never carries another's request. p NULL: always a new one. false: out of memory. */
bool rb_gw_curlpool_take(struct rb_gw_curlpool *p, const char *key, struct rb_gw_handle *h);

/* h back after its call (its easy handle out of its multi): reset and kept for key when
 * reusable (the transfer ended whole: the connection is at a response boundary), else cleaned
 * up, its connections closed. h is emptied. */
void rb_gw_curlpool_give(struct rb_gw_curlpool *p, const char *key, struct rb_gw_handle *h, bool reusable);

/* Runs h's transfer to its end on its multi, on this thread (as curl_easy_perform would, with
 * the connection of h's cache). */
CURLcode rb_gw_handle_perform(struct rb_gw_handle *h);

#endif
