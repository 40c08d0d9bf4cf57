#include "native/peers.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "core/clock.h"
#include "deploy/cluster.h"

enum { MAX_PEERS = 64 };

struct entry {
    char s3[128];
    char native[128]; /* "" when the node did not answer */
    uint64_t until_ms;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct entry cache[MAX_PEERS];

struct body {
    char b[512];
    size_t n;
};

static size_t on_body(char *p, size_t sz, size_t nm, void *arg)
{
    struct body *b = arg;
    size_t n = sz * nm;
    if (n > sizeof(b->b) - 1 - b->n)
        return 0; /* a reply this long is no port: fail the transfer */
    memcpy(b->b + b->n, p, n);
    b->n += n;
    return n;
}

/* Asks the node at s3 (host:port) for its native port: its native address
 * in out, or "" when it has none or does not answer. */
static void ask(const char *s3, char out[128])
{
    out[0] = 0;
    CURL *h = curl_easy_init();
    if (!h)
        return;
    char url[200];
    snprintf(url, sizeof(url), "http://%s/_openlake/native", s3);
    struct body b = {.n = 0};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)OL_NATIVE_PEERS_HTTP_MS);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)OL_NATIVE_PEERS_HTTP_MS);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
    long code = 0;
    if (curl_easy_perform(h) == CURLE_OK &&
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK && code == 200) {
        b.b[b.n] = 0;
        cJSON *j = cJSON_Parse(b.b);
        const cJSON *port = j ? cJSON_GetObjectItemCaseSensitive(j, "port") : NULL;
        const char *colon = strrchr(s3, ':');
        if (cJSON_IsNumber(port) && port->valuedouble > 0 && port->valuedouble < 65536 && colon) {
            int n = snprintf(out, 128, "%.*s:%d", (int)(colon - s3), s3, port->valueint);
            /* Its further lanes (lane 0 is "port" again, first). */
            const cJSON *ports = cJSON_GetObjectItemCaseSensitive(j, "ports");
            const cJSON *p;
            int i = 0;
            cJSON_ArrayForEach(p, ports)
            {
                if (i++ == 0 || !cJSON_IsNumber(p) || p->valuedouble <= 0 ||
                    p->valuedouble >= 65536 || n < 0 || n > 120)
                    continue;
                n += snprintf(out + n, 128 - (size_t)n, ",%d", p->valueint);
            }
        }
        cJSON_Delete(j);
    }
    curl_easy_cleanup(h);
}

/* The native address of the node at s3 ("" when none), cached. */
static void native_of(const char *s3, char native[128], uint64_t now)
{
    native[0] = 0;
    bool known = false;
    pthread_mutex_lock(&mu);
    for (unsigned c = 0; c < MAX_PEERS; c++)
        if (strcmp(cache[c].s3, s3) == 0 && cache[c].until_ms > now) {
            snprintf(native, 128, "%s", cache[c].native);
            known = true;
            break;
        }
    pthread_mutex_unlock(&mu);
    if (known)
        return;
    ask(s3, native);
    pthread_mutex_lock(&mu);
    /* The slot of this node, else the one that expires first. */
    unsigned slot = 0;
    for (unsigned c = 0; c < MAX_PEERS; c++) {
        if (strcmp(cache[c].s3, s3) == 0) {
            slot = c;
            break;
        }
        if (cache[c].until_ms < cache[slot].until_ms)
            slot = c;
    }
    snprintf(cache[slot].s3, sizeof(cache[slot].s3), "%s", s3);
    snprintf(cache[slot].native, sizeof(cache[slot].native), "%s", native);
    cache[slot].until_ms = now + (native[0] ? OL_NATIVE_PEERS_TTL_MS : OL_NATIVE_PEERS_RETRY_MS);
    pthread_mutex_unlock(&mu);
}

unsigned ol_native_cluster_peers(void *arg, char (*out)[128], unsigned max)
{
    (void)arg;
    char s3[MAX_PEERS][128];
    unsigned n = ol_cluster_peers_s3(s3, MAX_PEERS), got = 0;
    uint64_t now = ol_mono_ms();
    for (unsigned i = 0; i < n && got < max; i++) {
        char native[128];
        native_of(s3[i], native, now);
        if (native[0])
            snprintf(out[got++], 128, "%s", native);
    }
    return got;
}

int ol_native_cluster_node_addr(void *arg, const char *node, char out[128])
{
    (void)arg;
    out[0] = 0;
    /* The map as the map thread last saw it: the node's state and S3
     * address. */
    size_t cap = 256 * 1024;
    char *j = malloc(cap);
    if (!j)
        return -ENOMEM;
    int rc = ol_cluster_nodes_json(j, cap);
    cJSON *arr = rc == 0 ? cJSON_Parse(j) : NULL;
    free(j);
    char s3[128] = "";
    rc = -ENOENT;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr)
    {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *state = cJSON_GetObjectItemCaseSensitive(e, "state");
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(e, "s3");
        if (!cJSON_IsString(name) || strcmp(name->valuestring, node) != 0)
            continue;
        if (!cJSON_IsString(state) || strcmp(state->valuestring, "up") != 0)
            rc = -EHOSTDOWN;
        else if (cJSON_IsString(a) && strlen(a->valuestring) < sizeof(s3)) {
            snprintf(s3, sizeof(s3), "%s", a->valuestring);
            rc = 0;
        }
        break;
    }
    cJSON_Delete(arr);
    if (rc < 0)
        return rc;
    native_of(s3, out, ol_mono_ms());
    out[strcspn(out, ",")] = 0; /* lane 0's address */
    return out[0] ? 0 : -EHOSTUNREACH;
}
