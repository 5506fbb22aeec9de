/* RTLD_NEXT means "after the caller": libprobe_a.so asks for the next probe_target, which
   must be libprobe_b.so's, whoever interposes dlsym.
   Built three times: -DPROBE_A (libprobe_a.so), -DPROBE_B (libprobe_b.so), and the program. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

#if defined(PROBE_A)
char probe_target(void) { return 'A'; }
char probe_next(void) {
    char (*next)(void) = (char (*)(void))dlsym(RTLD_NEXT, "probe_target");
    return next ? next() : '?';
}
#elif defined(PROBE_B)
char probe_target(void) { return 'B'; }
#else
char probe_next(void);
int main(void) {
    printf("RTLD_NEXT from libprobe_a found probe_target of lib%c\n", probe_next());
    return 0;
}
#endif
