// bench/wakeup_floor.c -- the CPU a process spends to wake up at 1 ms deadlines, doing nothing else
//
//   cc -O2 bench/wakeup_floor.c -o wakeup_floor -ldl && ./wakeup_floor [SECONDS [nvml]]
//
// The floor under `vramscope record -i 1ms`: clock_nanosleep to absolute deadlines 1 ms apart
// (as cli/pacing.cpp sleeps), for SECONDS (10 by default); prints the wake-ups and the user and
// system CPU (getrusage) a wake-up, after what one clock_gettime costs. With `nvml`, each
// wake-up also reads GPU 0's memory (nvmlDeviceGetMemoryInfo_v2, dlopened), as any driver-view
// sampler must: the floor of a 1 kHz sample of the driver view. docs/benchmarks.md compares
// them with record's CPU a sample.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double cpu_seconds(void) {
  struct rusage used;
  getrusage(RUSAGE_SELF, &used);
  return (double)used.ru_utime.tv_sec + used.ru_utime.tv_usec / 1e6 + (double)used.ru_stime.tv_sec +
         used.ru_stime.tv_usec / 1e6;
}

/// What reading a clock costs here (a vDSO read, or a system call where the clocksource is not
/// one the vDSO can read: then every timestamp of a sample costs a kernel entry).
static void clock_cost(clockid_t id, const char* name) {
  const long count = 1000000;
  struct timespec now;
  const double began = cpu_seconds();
  for (long i = 0; i < count; ++i) clock_gettime(id, &now);
  printf("clock_gettime(%s): %.3f us CPU a call\n", name, 1e6 * (cpu_seconds() - began) / count);
}

/// nvmlMemory_v2_t.
struct memory_v2 {
  unsigned version;
  unsigned long long total, reserved, free, used;
};
typedef int (*init_fn)(void);
typedef int (*handle_fn)(unsigned, void**);
typedef int (*memory_fn)(void*, struct memory_v2*);

int main(int argc, char** argv) {
  clock_cost(CLOCK_MONOTONIC, "CLOCK_MONOTONIC");
  clock_cost(CLOCK_REALTIME, "CLOCK_REALTIME");
  const double seconds = argc > 1 ? atof(argv[1]) : 10.0;
  memory_fn read_memory = NULL;
  void* device = NULL;
  if (argc > 2 && strcmp(argv[2], "nvml") == 0) {
    void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (nvml == NULL) return 2;
    init_fn init = (init_fn)dlsym(nvml, "nvmlInit_v2");
    handle_fn handle = (handle_fn)dlsym(nvml, "nvmlDeviceGetHandleByIndex_v2");
    read_memory = (memory_fn)dlsym(nvml, "nvmlDeviceGetMemoryInfo_v2");
    if (init == NULL || handle == NULL || read_memory == NULL || init() != 0 ||
        handle(0, &device) != 0) {
      return 2;
    }
  }
  struct memory_v2 memory;
  const long count = (long)(seconds * 1000.0);
  const double before = cpu_seconds();
  struct timespec next;
  clock_gettime(CLOCK_MONOTONIC, &next);
  for (long i = 0; i < count; ++i) {
    next.tv_nsec += 1000000L;
    if (next.tv_nsec >= 1000000000L) {
      next.tv_nsec -= 1000000000L;
      next.tv_sec += 1;
    }
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) != 0) {
    }
    if (read_memory != NULL) {
      memory.version = (2U << 24U) | (unsigned)sizeof memory;
      read_memory(device, &memory);
    }
  }
  const double cpu = cpu_seconds() - before;
  printf("wake-ups at 1 ms for %g s%s: %ld, %.3f s CPU, %.1f us a wake-up\n", seconds,
         read_memory != NULL ? ", each reading GPU 0's memory through NVML" : "", count, cpu,
         1e6 * cpu / (double)count);
  return 0;
}
