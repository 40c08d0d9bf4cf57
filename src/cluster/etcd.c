/* etcd v3 over its JSON gateway: see etcd.h for the contract. */
#include "cluster/etcd.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"

struct ol_etcd {
    char *ep[OL_ETCD_MAX_ENDPOINTS];
    unsigned nep;
    unsigned cur; /* the endpoint that answered last */
    unsigned timeout_ms;
    CURL *h; /* kept across calls: its connection is reused */
    struct curl_slist *hdr;
};

/* A growing byte buffer with a hard cap (answers, watch lines). */
struct obuf {
    char *p;
    size_t len, cap, max;
    bool overflow;
};

static int obuf_append(struct obuf *b, const char *data, size_t n)
{
    if (b->len + n + 1 > b->max) {
        b->overflow = true;
        return -EMSGSIZE;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return -ENOMEM;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

/* libcurl's global state must be set up once, before any other thread uses
 * it; pthread_once makes the first client do it. */
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_once_rc;
static void curl_init_once(void)
{
    curl_once_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ---- base64 (OpenSSL's EVP_EncodeBlock / EVP_DecodeBlock) ---- */

static char *b64_encode(const void *data, size_t len)
{
    if (len > OL_ETCD_MAX_VALUE)
        return NULL;
    char *out = malloc(4 * ((len + 2) / 3) + 1);
    if (!out)
        return NULL;
    EVP_EncodeBlock((unsigned char *)out, data, (int)len);
    return out;
}

/* Decodes into a new NUL-terminated buffer.  EVP_DecodeBlock counts the '='
 * padding as output bytes, so they are taken off here. */
static int b64_decode(const char *in, char **out, size_t *out_len)
{
    size_t n = strlen(in);
    if (n % 4 != 0 || n / 4 * 3 > OL_ETCD_MAX_RESPONSE)
        return -EPROTO;
    char *p = malloc(n / 4 * 3 + 1);
    if (!p)
        return -ENOMEM;
    int len = n ? EVP_DecodeBlock((unsigned char *)p, (const unsigned char *)in, (int)n) : 0;
    if (len < 0) {
        free(p);
        return -EPROTO;
    }
    if (n >= 1 && in[n - 1] == '=')
        len--;
    if (n >= 2 && in[n - 2] == '=')
        len--;
    p[len] = '\0';
    *out = p;
    *out_len = (size_t)len;
    return 0;
}

/* ---- JSON helpers ---- */

/* The gateway writes int64 fields as strings, and leaves out zero values. */
static int64_t json_i64(const cJSON *obj, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (cJSON_IsString(v))
        return strtoll(v->valuestring, NULL, 10);
    if (cJSON_IsNumber(v))
        return (int64_t)v->valuedouble;
    return 0;
}

static bool json_add_i64(cJSON *obj, const char *name, int64_t v)
{
    char s[24];
    snprintf(s, sizeof(s), "%" PRId64, v);
    return cJSON_AddStringToObject(obj, name, s) != NULL;
}

static bool json_add_b64(cJSON *obj, const char *name, const void *data, size_t len)
{
    char *s = b64_encode(data, len);
    if (!s)
        return false;
    bool ok = cJSON_AddStringToObject(obj, name, s) != NULL;
    free(s);
    return ok;
}

/* The first key after every key that starts with prefix: the prefix with its
 * last byte below 0xff incremented and what follows dropped; "\0" (etcd's
 * "to the end") when there is none.  Written into out (>= len + 1 bytes). */
static size_t prefix_end(const char *prefix, size_t len, unsigned char *out)
{
    memcpy(out, prefix, len);
    while (len > 0) {
        if (out[len - 1] < 0xff) {
            out[len - 1]++;
            return len;
        }
        len--;
    }
    out[0] = 0;
    return 1;
}

/* Adds "key" and, for a prefix, "range_end". */
static bool json_add_range(cJSON *req, const char *key, bool prefix)
{
    size_t len = strlen(key);
    if (prefix && len == 0) {
        /* every key: from "\0" to the end */
        return json_add_b64(req, "key", "", 1) && json_add_b64(req, "range_end", "", 1);
    }
    if (!json_add_b64(req, "key", key, len))
        return false;
    if (!prefix)
        return true;
    unsigned char end[OL_ETCD_MAX_KEY + 1];
    size_t n = prefix_end(key, len, end);
    return json_add_b64(req, "range_end", end, n);
}

void ol_etcd_kv_clear(struct ol_etcd_kv *kv)
{
    free(kv->key);
    free(kv->value);
    memset(kv, 0, sizeof(*kv));
}

static int kv_parse(const cJSON *o, struct ol_etcd_kv *kv)
{
    memset(kv, 0, sizeof(*kv));
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(o, "key");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "value");
    if (!cJSON_IsString(k))
        return -EPROTO;
    size_t klen;
    int rc = b64_decode(k->valuestring, &kv->key, &klen);
    if (rc < 0)
        return rc;
    rc = b64_decode(cJSON_IsString(v) ? v->valuestring : "", &kv->value, &kv->value_len);
    if (rc < 0) {
        ol_etcd_kv_clear(kv);
        return rc;
    }
    kv->create_rev = json_i64(o, "create_revision");
    kv->mod_rev = json_i64(o, "mod_revision");
    kv->version = json_i64(o, "version");
    kv->lease = json_i64(o, "lease");
    return 0;
}

/* ---- errors ---- */

/* gRPC status codes (google.golang.org/grpc/codes) to ours. */
static int grpc_err(int code, const char *msg)
{
    switch (code) {
    case 5:
        return -ENOENT; /* NotFound: lease not found */
    case 11:
        return -OL_ECOMPACTED; /* OutOfRange: compacted (or a future revision) */
    case 3:
        return -EINVAL; /* InvalidArgument */
    case 4:
        return -ETIMEDOUT; /* DeadlineExceeded */
    case 14:
        return -EAGAIN; /* Unavailable: no leader, request timed out */
    case 7:
    case 16:
        return -EACCES; /* PermissionDenied, Unauthenticated */
    case 8:
        return -ENOSPC; /* ResourceExhausted: quota */
    default:
        ol_log_limited(OL_LOG_WARN, "etcd: error %d: %s", code, msg ? msg : "?");
        return -OL_EETCD;
    }
}

/* The code of a gateway error object ({"code": n, "message": ...} or, inside
 * a stream, {"grpc_code": n, ...}), 0 if obj is not one. */
static int json_err(const cJSON *obj)
{
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(obj, "code");
    if (!cJSON_IsNumber(code))
        code = cJSON_GetObjectItemCaseSensitive(obj, "grpc_code");
    if (!cJSON_IsNumber(code) || code->valueint == 0)
        return 0;
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(obj, "message");
    return grpc_err(code->valueint, cJSON_IsString(msg) ? msg->valuestring : NULL);
}

static int curl_err(CURLcode res)
{
    switch (res) {
    case CURLE_OK:
        return 0;
    case CURLE_COULDNT_CONNECT:
        return -ECONNREFUSED;
    case CURLE_COULDNT_RESOLVE_HOST:
        return -EHOSTUNREACH;
    case CURLE_OPERATION_TIMEDOUT:
        return -ETIMEDOUT;
    case CURLE_OUT_OF_MEMORY:
        return -ENOMEM;
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
        return -ECONNRESET;
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
        return -EINVAL;
    default:
        return -ECONNRESET;
    }
}

/* Failures that another endpoint might not have. */
static bool try_next(int rc)
{
    return rc == -ECONNREFUSED || rc == -EHOSTUNREACH || rc == -ETIMEDOUT || rc == -ECONNRESET ||
           rc == -EAGAIN;
}

/* ---- the client ---- */

int ol_etcd_create(struct ol_etcd **out, const char *endpoints, unsigned timeout_ms)
{
    *out = NULL;
    if (!endpoints || !*endpoints || timeout_ms == 0)
        return -EINVAL;
    pthread_once(&curl_once, curl_init_once);
    if (curl_once_rc != CURLE_OK)
        return -ENOMEM;
    struct ol_etcd *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    int rc = -EINVAL;
    const char *p = endpoints;
    while (*p) {
        size_t n = strcspn(p, ",");
        if (n == 0 || n > 256 || c->nep == OL_ETCD_MAX_ENDPOINTS)
            goto fail;
        /* "http://host:port" with any trailing '/' dropped: paths are added */
        while (n > 0 && p[n - 1] == '/')
            n--;
        c->ep[c->nep] = strndup(p, n);
        if (!c->ep[c->nep]) {
            rc = -ENOMEM;
            goto fail;
        }
        c->nep++;
        p += strcspn(p, ",");
        if (*p == ',')
            p++;
    }
    if (c->nep == 0)
        goto fail;
    c->timeout_ms = timeout_ms;
    c->h = curl_easy_init();
    c->hdr = curl_slist_append(NULL, "Content-Type: application/json");
    if (!c->h || !c->hdr) {
        rc = -ENOMEM;
        goto fail;
    }
    *out = c;
    return 0;
fail:
    ol_etcd_destroy(c);
    return rc;
}

void ol_etcd_destroy(struct ol_etcd *c)
{
    if (!c)
        return;
    for (unsigned i = 0; i < c->nep; i++)
        free(c->ep[i]);
    if (c->h)
        curl_easy_cleanup(c->h);
    curl_slist_free_all(c->hdr);
    free(c);
}

void ol_etcd_set_timeout(struct ol_etcd *c, unsigned timeout_ms)
{
    if (timeout_ms > 0)
        c->timeout_ms = timeout_ms;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
    struct obuf *b = arg;
    return obuf_append(b, data, size * nmemb) == 0 ? size * nmemb : 0;
}

/* One POST to one endpoint.  *sent: whether any byte of the request left
 * (a write that was sent must not be retried elsewhere). */
static int attempt(struct ol_etcd *c, unsigned ep, const char *path, const char *body, bool *sent,
                   cJSON **out)
{
    char url[512];
    snprintf(url, sizeof(url), "%s%s", c->ep[ep], path);
    struct obuf resp = {.max = OL_ETCD_MAX_RESPONSE};
    CURL *h = c->h;
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->hdr);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &resp);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)c->timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)c->timeout_ms);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM for timeouts */
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    CURLcode res = curl_easy_perform(h);
    long req_bytes = 0, status = 0;
    curl_easy_getinfo(h, CURLINFO_REQUEST_SIZE, &req_bytes);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    *sent = req_bytes > 0;
    int rc = 0;
    if (res != CURLE_OK) {
        rc = resp.overflow ? -EMSGSIZE : curl_err(res);
        goto out;
    }
    /* A streamed answer (lease keepalive) wraps its message in "result", or
     * an error in "error". */
    cJSON *j = cJSON_ParseWithLength(resp.p ? resp.p : "", resp.len);
    if (!j) {
        rc = status == 200 ? -EPROTO : (status == 503 ? -EAGAIN : -OL_EETCD);
        goto out;
    }
    cJSON *err = cJSON_GetObjectItemCaseSensitive(j, "error");
    if (status != 200 || cJSON_IsObject(err)) {
        rc = json_err(cJSON_IsObject(err) ? err : j);
        if (rc == 0)
            rc = status == 503 ? -EAGAIN : -OL_EETCD;
        cJSON_Delete(j);
        goto out;
    }
    cJSON *result = cJSON_GetObjectItemCaseSensitive(j, "result");
    if (cJSON_IsObject(result)) {
        cJSON_DetachItemViaPointer(j, result);
        cJSON_Delete(j);
        j = result;
    }
    *out = j;
out:
    free(resp.p);
    return rc;
}

/* One call, moving over the endpoints as etcd.h describes. */
static int call(struct ol_etcd *c, const char *path, cJSON *req, bool write, cJSON **out)
{
    *out = NULL;
    char *body = req ? cJSON_PrintUnformatted(req) : NULL;
    if (!body)
        return -ENOMEM;
    int rc = -ECONNREFUSED;
    for (unsigned i = 0; i < c->nep; i++) {
        unsigned ep = (c->cur + i) % c->nep;
        bool sent = false;
        rc = attempt(c, ep, path, body, &sent, out);
        if (!try_next(rc)) {
            c->cur = ep;
            break;
        }
        if (write && sent)
            break;
        ol_debug("etcd: %s%s: %s, trying the next endpoint", c->ep[ep], path, ol_strerror(rc));
    }
    free(body);
    return rc;
}

static int64_t header_rev(const cJSON *resp)
{
    return json_i64(cJSON_GetObjectItemCaseSensitive(resp, "header"), "revision");
}

static bool key_ok(const char *key)
{
    return key && strlen(key) <= OL_ETCD_MAX_KEY;
}

int ol_etcd_get(struct ol_etcd *c, const char *key, struct ol_etcd_kv *kv, int64_t *rev)
{
    memset(kv, 0, sizeof(*kv));
    if (!key_ok(key) || !*key)
        return -EINVAL;
    cJSON *req = cJSON_CreateObject(), *resp = NULL;
    int rc = -ENOMEM;
    if (!req || !json_add_range(req, key, false))
        goto out;
    rc = call(c, "/v3/kv/range", req, false, &resp);
    if (rc < 0)
        goto out;
    if (rev)
        *rev = header_rev(resp);
    const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(resp, "kvs");
    const cJSON *first = cJSON_IsArray(kvs) ? cJSON_GetArrayItem(kvs, 0) : NULL;
    rc = first ? kv_parse(first, kv) : -ENOENT;
out:
    cJSON_Delete(req);
    cJSON_Delete(resp);
    return rc;
}

void ol_etcd_range_clear(struct ol_etcd_range *r)
{
    for (size_t i = 0; i < r->n; i++)
        ol_etcd_kv_clear(&r->kvs[i]);
    free(r->kvs);
    memset(r, 0, sizeof(*r));
}

int ol_etcd_get_prefix(struct ol_etcd *c, const char *prefix, size_t limit, struct ol_etcd_range *r)
{
    memset(r, 0, sizeof(*r));
    if (!key_ok(prefix))
        return -EINVAL;
    if (limit == 0 || limit > OL_ETCD_MAX_RANGE)
        limit = OL_ETCD_MAX_RANGE;
    cJSON *req = cJSON_CreateObject(), *resp = NULL;
    int rc = -ENOMEM;
    if (!req || !json_add_range(req, prefix, true) || !json_add_i64(req, "limit", (int64_t)limit))
        goto out;
    rc = call(c, "/v3/kv/range", req, false, &resp);
    if (rc < 0)
        goto out;
    r->rev = header_rev(resp);
    r->more = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "more"));
    const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(resp, "kvs");
    size_t n = cJSON_IsArray(kvs) ? (size_t)cJSON_GetArraySize(kvs) : 0;
    if (n > limit) {
        rc = -EPROTO;
        goto out;
    }
    if (n) {
        r->kvs = calloc(n, sizeof(*r->kvs));
        if (!r->kvs) {
            rc = -ENOMEM;
            goto out;
        }
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, kvs)
    {
        rc = kv_parse(it, &r->kvs[r->n]);
        if (rc < 0)
            goto out;
        r->n++;
    }
    rc = 0;
out:
    if (rc < 0)
        ol_etcd_range_clear(r);
    cJSON_Delete(req);
    cJSON_Delete(resp);
    return rc;
}

/* {"key", "value", "lease"}: the body of a put, alone or inside a txn. */
static cJSON *put_body(const char *key, const void *value, size_t len, int64_t lease)
{
    cJSON *o = cJSON_CreateObject();
    if (!o || !json_add_b64(o, "key", key, strlen(key)) || !json_add_b64(o, "value", value, len) ||
        (lease && !json_add_i64(o, "lease", lease))) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

int ol_etcd_put(struct ol_etcd *c, const char *key, const void *value, size_t len, int64_t lease,
                int64_t *rev)
{
    if (!key_ok(key) || !*key || len > OL_ETCD_MAX_VALUE || (len && !value))
        return -EINVAL;
    cJSON *req = put_body(key, len ? value : "", len, lease), *resp = NULL;
    if (!req)
        return -ENOMEM;
    int rc = call(c, "/v3/kv/put", req, true, &resp);
    if (rc == 0 && rev)
        *rev = header_rev(resp);
    cJSON_Delete(req);
    cJSON_Delete(resp);
    return rc;
}

int ol_etcd_delete(struct ol_etcd *c, const char *key, bool prefix, int64_t *deleted)
{
    if (!key_ok(key) || (!*key && !prefix))
        return -EINVAL;
    cJSON *req = cJSON_CreateObject(), *resp = NULL;
    int rc = -ENOMEM;
    if (!req || !json_add_range(req, key, prefix))
        goto out;
    rc = call(c, "/v3/kv/deleterange", req, true, &resp);
    if (rc == 0 && deleted)
        *deleted = json_i64(resp, "deleted");
out:
    cJSON_Delete(req);
    cJSON_Delete(resp);
    return rc;
}

int ol_etcd_cas(struct ol_etcd *c, const char *key, enum ol_etcd_if cond, int64_t want,
                const void *value, size_t len, int64_t lease, int64_t *rev)
{
    if (!key_ok(key) || !*key || len > OL_ETCD_MAX_VALUE || (len && !value) || want < 0)
        return -EINVAL;
    cJSON *req = cJSON_CreateObject(), *resp = NULL;
    int rc = -ENOMEM;
    if (!req)
        goto out;
    cJSON *cmps = cJSON_AddArrayToObject(req, "compare");
    cJSON *cmp = cJSON_CreateObject();
    if (!cmps || !cmp || !cJSON_AddItemToArray(cmps, cmp) ||
        !json_add_b64(cmp, "key", key, strlen(key)) ||
        !cJSON_AddStringToObject(cmp, "result", "EQUAL"))
        goto out;
    bool ok;
    switch (cond) {
    case OL_ETCD_IF_MOD:
        ok = cJSON_AddStringToObject(cmp, "target", "MOD") &&
             json_add_i64(cmp, "mod_revision", want);
        break;
    case OL_ETCD_IF_VERSION:
        ok =
            cJSON_AddStringToObject(cmp, "target", "VERSION") && json_add_i64(cmp, "version", want);
        break;
    case OL_ETCD_IF_ABSENT:
        ok = cJSON_AddStringToObject(cmp, "target", "VERSION") && json_add_i64(cmp, "version", 0);
        break;
    default:
        rc = -EINVAL;
        goto out;
    }
    if (!ok)
        goto out;
    cJSON *succ = cJSON_AddArrayToObject(req, "success");
    cJSON *op = cJSON_CreateObject();
    if (!succ || !op || !cJSON_AddItemToArray(succ, op))
        goto out;
    cJSON *body;
    if (value || len) {
        body = put_body(key, len ? value : "", len, lease);
        if (!body || !cJSON_AddItemToObject(op, "request_put", body)) {
            cJSON_Delete(body);
            goto out;
        }
    } else {
        body = cJSON_CreateObject();
        if (!body || !cJSON_AddItemToObject(op, "request_delete_range", body)) {
            cJSON_Delete(body);
            goto out;
        }
        if (!json_add_b64(body, "key", key, strlen(key)))
            goto out;
    }
    rc = call(c, "/v3/kv/txn", req, true, &resp);
    if (rc < 0)
        goto out;
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "succeeded"))) {
        rc = -OL_ECASFAIL;
        goto out;
    }
    if (rev)
        *rev = header_rev(resp);
out:
    cJSON_Delete(req);
    cJSON_Delete(resp);
    return rc;
}

int ol_etcd_compact(struct ol_etcd *c, int64_t rev)
{
    cJSON *req = cJSON_CreateObject(), *resp = NULL;
    int rc = -ENOMEM;
    if (req && json_add_i64(req, "revision", rev))
        rc = call(c, "/v3/kv/compaction", req, true, &resp);
    cJSON_Delete(req);
    cJSON_Delete(resp);
    return rc;
}

int ol_etcd_lease_grant(struct ol_etcd *c, int64_t ttl_s, int64_t *id, int64_t *granted_s)
{
    if (ttl_s <= 0)
        return -EINVAL;
    cJSON *req = cJSON_CreateObject(), *resp = NULL;
    int rc = -ENOMEM;
    if (!req || !json_add_i64(req, "TTL", ttl_s))
        goto out;
    /* Granting is a write: a grant that timed out after it was sent may have
     * made a lease, which then expires unused; harmless, so not retried. */
    rc = call(c, "/v3/lease/grant", req, true, &resp);
    if (rc < 0)
        goto out;
    *id = json_i64(resp, "ID");
    if (granted_s)
        *granted_s = json_i64(resp, "TTL");
    if (*id == 0)
        rc = -EPROTO;
out:
    cJSON_Delete(req);
    cJSON_Delete(resp);
    return rc;
}

int ol_etcd_lease_keepalive(struct ol_etcd *c, int64_t id, int64_t *ttl_s)
{
    cJSON *req = cJSON_CreateObject(), *resp = NULL;
    int rc = -ENOMEM;
    if (!req || !json_add_i64(req, "ID", id))
        goto out;
    /* A renewal is safe to repeat: it only resets the TTL again. */
    rc = call(c, "/v3/lease/keepalive", req, false, &resp);
    if (rc < 0)
        goto out;
    /* An unknown or expired lease answers with a TTL of 0 (left out). */
    int64_t ttl = json_i64(resp, "TTL");
    if (ttl <= 0)
        rc = -ENOENT;
    else if (ttl_s)
        *ttl_s = ttl;
out:
    cJSON_Delete(req);
    cJSON_Delete(resp);
    return rc;
}

int ol_etcd_lease_revoke(struct ol_etcd *c, int64_t id)
{
    cJSON *req = cJSON_CreateObject(), *resp = NULL;
    int rc = -ENOMEM;
    if (req && json_add_i64(req, "ID", id))
        rc = call(c, "/v3/lease/revoke", req, true, &resp);
    cJSON_Delete(req);
    cJSON_Delete(resp);
    return rc;
}

/* ---- watches ---- */

struct ol_etcd_watch {
    struct ol_etcd *c;
    unsigned ep;
    CURL *h;
    CURLM *m;
    char *body;
    struct obuf line; /* bytes of the message being received */
    ol_etcd_watch_fn fn;
    void *arg;
    int64_t next_rev, compact_rev;
    bool created;
    int rc; /* 0 while running, then why it ended */
    atomic_bool cancel;
};

/* One message of the stream: {"result": WatchResponse} or {"error": ...}. */
static int watch_msg(struct ol_etcd_watch *w, const char *s, size_t len)
{
    cJSON *j = cJSON_ParseWithLength(s, len);
    if (!j)
        return -EPROTO;
    int rc = 0;
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(j, "error");
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(j, "result");
    if (cJSON_IsObject(err) || !cJSON_IsObject(res)) {
        rc = json_err(cJSON_IsObject(err) ? err : j);
        if (rc == 0)
            rc = -EPROTO;
        goto out;
    }
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "created")))
        w->created = true;
    const cJSON *evs = cJSON_GetObjectItemCaseSensitive(res, "events");
    const cJSON *it;
    cJSON_ArrayForEach(it, evs)
    {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(it, "type");
        struct ol_etcd_kv kv;
        rc = kv_parse(cJSON_GetObjectItemCaseSensitive(it, "kv"), &kv);
        if (rc < 0)
            goto out;
        struct ol_etcd_event ev = {
            .type = cJSON_IsString(type) && strcmp(type->valuestring, "DELETE") == 0
                        ? OL_ETCD_DELETE
                        : OL_ETCD_PUT,
            .kv = &kv,
        };
        if (kv.mod_rev >= w->next_rev)
            w->next_rev = kv.mod_rev + 1;
        rc = w->fn(w->arg, &ev);
        ol_etcd_kv_clear(&kv);
        if (rc < 0)
            goto out;
        rc = 0;
    }
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "canceled"))) {
        w->compact_rev = json_i64(res, "compact_revision");
        if (w->compact_rev > 0) {
            rc = -OL_ECOMPACTED;
        } else {
            const cJSON *why = cJSON_GetObjectItemCaseSensitive(res, "cancel_reason");
            ol_warn("etcd: watch canceled by etcd: %s",
                    cJSON_IsString(why) ? why->valuestring : "no reason given");
            rc = -OL_EETCD;
        }
    }
out:
    cJSON_Delete(j);
    return rc;
}

/* Splits the stream into its newline-separated messages. */
static size_t on_watch_body(char *data, size_t size, size_t nmemb, void *arg)
{
    struct ol_etcd_watch *w = arg;
    size_t n = size * nmemb;
    if (w->rc)
        return 0;
    int rc = obuf_append(&w->line, data, n);
    if (rc < 0) {
        w->rc = rc;
        return 0;
    }
    size_t start = 0;
    for (size_t i = 0; i < w->line.len; i++) {
        if (w->line.p[i] != '\n')
            continue;
        if (i > start) {
            rc = watch_msg(w, w->line.p + start, i - start);
            if (rc < 0) {
                w->rc = rc;
                return 0; /* ends the transfer */
            }
        }
        start = i + 1;
    }
    memmove(w->line.p, w->line.p + start, w->line.len - start);
    w->line.len -= start;
    return n;
}

int ol_etcd_watch_open(struct ol_etcd *c, const char *prefix, int64_t start_rev,
                       ol_etcd_watch_fn fn, void *arg, struct ol_etcd_watch **out)
{
    *out = NULL;
    if (!key_ok(prefix) || !fn || start_rev < 0)
        return -EINVAL;
    struct ol_etcd_watch *w = calloc(1, sizeof(*w));
    cJSON *req = cJSON_CreateObject();
    cJSON *cr = cJSON_CreateObject();
    int rc = -ENOMEM;
    if (!w || !req || !cr || !cJSON_AddItemToObject(req, "create_request", cr)) {
        cJSON_Delete(cr);
        goto fail;
    }
    if (!json_add_range(cr, prefix, true) ||
        (start_rev > 0 && !json_add_i64(cr, "start_revision", start_rev)))
        goto fail;
    w->body = cJSON_PrintUnformatted(req);
    w->h = curl_easy_init();
    w->m = curl_multi_init();
    if (!w->body || !w->h || !w->m)
        goto fail;
    w->c = c;
    w->ep = c->cur;
    w->fn = fn;
    w->arg = arg;
    w->next_rev = start_rev;
    w->line.max = OL_ETCD_MAX_WATCH_LINE;
    atomic_init(&w->cancel, false);
    char url[512];
    snprintf(url, sizeof(url), "%s/v3/watch", c->ep[w->ep]);
    curl_easy_setopt(w->h, CURLOPT_URL, url);
    curl_easy_setopt(w->h, CURLOPT_POSTFIELDS, w->body);
    curl_easy_setopt(w->h, CURLOPT_POSTFIELDSIZE, (long)strlen(w->body));
    curl_easy_setopt(w->h, CURLOPT_HTTPHEADER, c->hdr);
    curl_easy_setopt(w->h, CURLOPT_WRITEFUNCTION, on_watch_body);
    curl_easy_setopt(w->h, CURLOPT_WRITEDATA, w);
    curl_easy_setopt(w->h, CURLOPT_CONNECTTIMEOUT_MS, (long)c->timeout_ms);
    curl_easy_setopt(w->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(w->h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(w->h, CURLOPT_PROTOCOLS_STR, "http,https");
    if (curl_multi_add_handle(w->m, w->h) != CURLM_OK)
        goto fail;
    cJSON_Delete(req);
    *out = w;
    return 0;
fail:
    cJSON_Delete(req);
    ol_etcd_watch_close(w);
    return rc;
}

/* The transfer is over: why. */
static int watch_done(struct ol_etcd_watch *w, CURLcode res)
{
    if (w->rc)
        return w->rc;
    if (res != CURLE_OK) {
        int rc = curl_err(res);
        /* The stream's endpoint is unreachable: the next open tries another. */
        if ((rc == -ECONNREFUSED || rc == -EHOSTUNREACH || rc == -ETIMEDOUT) &&
            w->c->cur == w->ep && w->c->nep > 1)
            w->c->cur = (w->ep + 1) % w->c->nep;
        return rc;
    }
    /* A complete answer: an error reply without a trailing newline, or a
     * last message; either way the stream has ended. */
    if (w->line.len > 0) {
        int rc = watch_msg(w, w->line.p, w->line.len);
        w->line.len = 0;
        if (rc < 0)
            return rc;
    }
    return -ECONNRESET;
}

int ol_etcd_watch_poll(struct ol_etcd_watch *w, unsigned timeout_ms)
{
    uint64_t end = ol_mono_ms() + timeout_ms;
    for (;;) {
        if (w->rc)
            return w->rc;
        if (atomic_load(&w->cancel)) {
            w->rc = -ECANCELED;
            return w->rc;
        }
        int running = 0;
        if (curl_multi_perform(w->m, &running) != CURLM_OK) {
            w->rc = -ENOMEM;
            return w->rc;
        }
        int left;
        CURLMsg *msg;
        while ((msg = curl_multi_info_read(w->m, &left)) != NULL) {
            if (msg->msg == CURLMSG_DONE)
                w->rc = watch_done(w, msg->data.result);
        }
        if (w->rc)
            return w->rc;
        uint64_t now = ol_mono_ms();
        if (now >= end)
            return 0;
        /* curl_multi_poll also returns when ol_etcd_watch_cancel wakes it */
        unsigned wait_ms = (unsigned)(end - now);
        if (curl_multi_poll(w->m, NULL, 0, (int)(wait_ms > 1000 ? 1000 : wait_ms), NULL) !=
            CURLM_OK) {
            w->rc = -ENOMEM;
            return w->rc;
        }
    }
}

void ol_etcd_watch_cancel(struct ol_etcd_watch *w)
{
    atomic_store(&w->cancel, true);
    curl_multi_wakeup(w->m);
}

void ol_etcd_watch_close(struct ol_etcd_watch *w)
{
    if (!w)
        return;
    if (w->m && w->h)
        curl_multi_remove_handle(w->m, w->h);
    if (w->h)
        curl_easy_cleanup(w->h);
    if (w->m)
        curl_multi_cleanup(w->m);
    free(w->body);
    free(w->line.p);
    free(w);
}

int64_t ol_etcd_watch_next_rev(const struct ol_etcd_watch *w)
{
    return w->next_rev;
}

int64_t ol_etcd_watch_compacted(const struct ol_etcd_watch *w)
{
    return w->compact_rev;
}

bool ol_etcd_watch_created(const struct ol_etcd_watch *w)
{
    return w->created;
}
