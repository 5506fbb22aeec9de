/* streamsan's annotation API: declare memory that the CUDA driver does not see allocated.
 *
 * A framework that sub-allocates from large driver allocations (a caching allocator, a
 * memory pool of its own) can tell streamsan about each block, so that the block is checked
 * like a driver allocation: used before its allocation is ordered, freed while another
 * stream still uses it, used after its free. A block is looked up before the allocation that
 * contains it (the innermost buffer wins).
 *
 * `stream` orders the allocation or the free like cuMemAllocAsync/cuMemFreeAsync on that
 * stream (0 is the legacy default stream, CU_STREAM_PER_THREAD the caller's per-thread
 * one); a synchronous allocation or free passes `synchronous = 1` and any stream.
 *
 * The functions exist only while the shim is preloaded: look them up with
 * dlsym(RTLD_DEFAULT, "streamsan_annotate_alloc") and call them only if found. */
#ifndef STREAMSAN_H
#define STREAMSAN_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif

void streamsan_annotate_alloc(const void *ptr, size_t size, void *stream, int synchronous);
void streamsan_annotate_free(const void *ptr, void *stream, int synchronous);

/* The report so far, as a NUL-terminated JSON document (docs/report/schema.json), for a program
 * that checks itself; release it with streamsan_free_report. Look both up with dlsym. */
char *streamsan_report_json(void);
void streamsan_free_report(char *report);

/* The test API, for a test runner (the pytest plugin uses it): name the test running (NULL or
 * "" for none), so that each race names the test its second operation was made in; at the
 * test's end, ask for those races as streamsan prints them (NULL when there are none; release
 * the text with streamsan_free_report) and fail the test with them. Look both up with dlsym. */
void streamsan_set_test(const char *name);
char *streamsan_test_races(const char *name);

#ifdef __cplusplus
}
#endif
#endif
