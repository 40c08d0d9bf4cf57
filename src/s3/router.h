/* The S3 request router: the HTTP handler of the S3 listener. */
#ifndef OL_S3_ROUTER_H
#define OL_S3_ROUTER_H

#include <stddef.h>
#include <stdint.h>

#include "http/conn.h"
#include "s3/s3.h"

#define OL_ROUTER_MAX_LOOPS 256

/* What the server lends the router for the admin routes. */
struct ol_server_hooks {
    /* Writes the Prometheus text into a malloc'ed buffer the router frees. */
    void (*metrics)(void *ctx, char **text, size_t *len);
    void *ctx;
};

struct ol_s3_router {
    struct ol_s3_ctx ctx;
    struct ol_server_hooks hooks;
    /* Requests by loop (each slot written only by its loop) and method. */
    uint64_t requests[OL_ROUTER_MAX_LOOPS][6];
};

enum { OL_M_GET, OL_M_HEAD, OL_M_PUT, OL_M_DELETE, OL_M_POST, OL_M_OTHER };

/* The ol_http_handler for S3; ctx is a struct ol_s3_router. */
int ol_s3_handle(void *ctx, struct ol_http_conn *c, struct ol_http_req *req);

/* Counts a request in the caller loop's slot. */
void ol_router_count(struct ol_s3_router *rt, const struct ol_http_req *req);

#endif
