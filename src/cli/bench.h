/* `openlake bench`: an S3 load generator (GET/PUT/HEAD/DELETE/LIST and mixes).
 *
 * One thread (or --threads N) drives every connection through epoll,
 * non-blocking, over keep-alive connections, so that the tool costs a small
 * fraction of what the server it measures costs.  Object bodies are windows
 * of one pseudo-random pattern chosen by (object index, size), so PUT bodies
 * are sent without being generated and GET bodies are verified by memcmp.
 */
#ifndef OL_CLI_BENCH_H
#define OL_CLI_BENCH_H

/* argv[0] is "bench".  Returns the process exit status: 0 when the run had
 * no errors, 1 when it counted any, 2 on bad arguments or set-up failure. */
int ol_bench_main(int argc, char **argv);

#endif
