/* bench/peak.c — fp32 FMA peak of this machine, to put GFLOP/s figures in proportion.
 *
 * Each thread runs a tight loop of NACC independent accumulator chains
 *     acc[i] = acc[i] * m + c          (one vfmadd per accumulator per iteration)
 * on 512-bit (zmm, 16 floats) or 256-bit (ymm, 8 floats) vectors.  An FMA counts as 2
 * flops per lane.  With NACC independent chains the loop is bound by FMA throughput,
 * not latency (latency 4 cycles x 2 FMA pipes needs >= 8 chains in flight).
 *
 * This one file is compiled three times (see the Makefile):
 *   -DPEAK_PART=512  -mavx512f -mfma   the zmm kernel   (peak_fma512)
 *   -DPEAK_PART=256  -mavx2 -mfma      the ymm kernel   (peak_fma256)
 *   (no PEAK_PART)   baseline flags    main: threads, timing, CPU checks
 * so that no AVX instruction can leak into code that runs before the run-time check
 * (__builtin_cpu_supports).
 *
 *   peak [--threads N] [--isa avx512|avx2|all] [--reps R] [--ms MS]
 * measures 1 thread, then N threads (default: the online CPUs; one pthread per core,
 * pinned), for each ISA the CPU has, and prints one RESULT line each:
 *   RESULT bench=clock ghz=..                       (dependent integer adds, 1 thread)
 *   RESULT bench=fma_peak isa=avx512 threads=1 gflops=.. min=.. max=.. per_thread=..
 *          flops_per_cycle=.. of_max=64 ...
 * gflops is the median over R repetitions of total flops / (last thread's end - first
 * thread's start), after a short per-thread warm-up. With 2 or more threads pinned, also
 *   RESULT bench=pingpong cpus=A,B round_trip_ns=..  (median of 5 x 20,000 round trips)
 * the time for a cache line to go from CPU A to CPU B and back (one atomic flag, each side
 * waiting for the other's store): a virtual machine's vCPUs can sit on cores that share a cache
 * or on cores far apart, and move between the two while running (68-120 against 360-420 ns on
 * a Zen 5 host (2026-11-28), where the far state made bf16 LeNet5 on 2
 * threads 30 % slower). peak --pingpong-only prints that line alone. */
#if !defined(PEAK_PART)
#define _GNU_SOURCE
#endif
#include <stddef.h>
#include <stdint.h>

#define NACC 16

#if defined(PEAK_PART)
#if PEAK_PART == 512
#define W 16
#define FN peak_fma512
#define NA NACC
#elif PEAK_PART == 256
#define W 8
#define FN peak_fma256
#define NA 12 /* 16 ymm registers: 12 accumulators + m + c, no spills */
#else
#error "PEAK_PART must be 512 or 256"
#endif
#include <immintrin.h>
/* GCC vector types; the multiply-add is the explicit FMA intrinsic, since -std=c11 turns
 * contraction of a * b + c off */
#if W == 16
typedef __m512 vf;
#define FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#else
typedef __m256 vf;
#define FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#endif

/* Runs iters iterations; returns a value that depends on every accumulator (so nothing is
 * dead code) and writes the flops done to *flops. */
float FN(uint64_t iters, float seed, double *flops);
float FN(uint64_t iters, float seed, double *flops) {
  /* 16 named accumulators (an array would be kept in memory and stored every iteration) */
  vf m, c, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15;
  for (int k = 0; k < W; k++) {
    m[k] = 0.999999f;
    c[k] = 1e-7f * seed;
  }
  a0 = c + seed;
  // clang-format off
#define I(i, j) a##i = a##j + c;
  I(1, 0) I(2, 1) I(3, 2) I(4, 3) I(5, 4) I(6, 5) I(7, 6) I(8, 7)
  I(9, 8) I(10, 9) I(11, 10) I(12, 11) I(13, 12) I(14, 13) I(15, 14)
#undef I
  (void)a12, (void)a13, (void)a14, (void)a15; /* unused with 12 accumulators */
  for (uint64_t it = 0; it < iters; it++) {
#define F(i) a##i = FMA(a##i, m, c);
    F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11)
#if NA > 12
    F(12) F(13) F(14) F(15)
#endif
#undef F
    /* an empty asm that "modifies" the accumulators: nothing is hoisted out of the loop or
     * folded across iterations, and the accumulators stay in registers */
    __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5));
    __asm__ volatile("" : "+v"(a6), "+v"(a7), "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11));
#if NA > 12
    __asm__ volatile("" : "+v"(a12), "+v"(a13), "+v"(a14), "+v"(a15));
#endif
    // clang-format on
  }
  vf s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;
#if NA > 12
  s += a12 + a13 + a14 + a15;
#endif
  float r = 0;
  for (int k = 0; k < W; k++) r += s[k];
  *flops = (double)iters * NA * W * 2.0;
  return r;
}

#else /* main part ------------------------------------------------------------------- */

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

float peak_fma512(uint64_t iters, float seed, double *flops);
float peak_fma256(uint64_t iters, float seed, double *flops);
typedef float (*kern_fn)(uint64_t, float, double *);

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* the ping-pong: the main thread on CPU a, a thread on CPU b; flag 1 = b's turn, 0 = a's */
#define PP_TRIPS 20000
static volatile int pp_flag __attribute__((aligned(64)));
static void *pp_side(void *arg) {
  int c = *(const int *)arg;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(c, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  for (int i = 0; i < 5 * PP_TRIPS; i++) {
    while (__atomic_load_n(&pp_flag, __ATOMIC_ACQUIRE) != 1) {
    }
    __atomic_store_n(&pp_flag, 0, __ATOMIC_RELEASE);
  }
  return NULL;
}
static void pingpong(int a, int b) {
  cpu_set_t set, old;
  pthread_getaffinity_np(pthread_self(), sizeof old, &old);
  CPU_ZERO(&set);
  CPU_SET(a, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  pp_flag = 0;
  pthread_t th;
  if (pthread_create(&th, NULL, pp_side, &b)) {
    pthread_setaffinity_np(pthread_self(), sizeof old, &old);
    return;
  }
  double r[5];
  for (int k = 0; k < 5; k++) {
    double t0 = now();
    for (int i = 0; i < PP_TRIPS; i++) {
      __atomic_store_n(&pp_flag, 1, __ATOMIC_RELEASE);
      while (__atomic_load_n(&pp_flag, __ATOMIC_ACQUIRE) != 0) {
      }
    }
    r[k] = (now() - t0) / PP_TRIPS * 1e9;
  }
  pthread_join(th, NULL);
  pthread_setaffinity_np(pthread_self(), sizeof old, &old);
  qsort(r, 5, sizeof *r, cmp);
  printf("RESULT bench=pingpong cpus=%d,%d round_trip_ns=%.1f min=%.1f max=%.1f\n", a, b, r[2],
         r[0], r[4]);
}

/* The core clock, from a chain of dependent integer adds (1 cycle each on every x86 of
 * the last 20 years): median of 5 runs of ~50 ms, after 0.3 s of spinning.  0 when not on x86-64.
 */
static double clock_ghz(void) {
#if defined(__x86_64__)
  double g[5], t_end = now() + 0.3;
  while (now() < t_end) { /* warm-up: let the clock ramp up from idle */
  }
  for (int r = 0; r < 5; r++) {
    uint64_t n = 25000000, x = 0;
    double t0 = now();
    for (uint64_t i = 0; i < n; i++)
      __asm__ volatile("add $1,%0\n\tadd $1,%0\n\tadd $1,%0\n\tadd $1,%0\n\t"
                       "add $1,%0\n\tadd $1,%0\n\tadd $1,%0\n\tadd $1,%0"
                       : "+r"(x));
    g[r] = 8.0 * (double)n / (now() - t0) * 1e-9;
  }
  qsort(g, 5, sizeof *g, cmp);
  return g[2];
#else
  return 0;
#endif
}

typedef struct {
  kern_fn fn;
  uint64_t iters;
  int cpu;
  pthread_barrier_t *bar;
  double t0, t1, flops;
  float sink;
} job;

static void *worker(void *arg) {
  job *j = arg;
  if (j->cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(j->cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set); /* best effort */
  }
  j->fn(j->iters / 64 + 1, 1.0f, &j->flops); /* warm-up: clocks up, AVX-512 units on */
  pthread_barrier_wait(j->bar);
  j->t0 = now();
  j->sink = j->fn(j->iters, 1.0f + (float)j->cpu * 1e-3f, &j->flops);
  j->t1 = now();
  return NULL;
}

/* one repetition with nt threads: total flops / (last finish - first start) */
static double run_rep(kern_fn fn, int nt, uint64_t iters, const int *cpus, float *sink) {
  job jobs[256];
  pthread_t th[256];
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, (unsigned)nt);
  for (int i = 0; i < nt; i++) {
    jobs[i] = (job){.fn = fn, .iters = iters, .cpu = cpus ? cpus[i] : -1, .bar = &bar};
    if (pthread_create(&th[i], NULL, worker, &jobs[i])) {
      perror("peak: pthread_create");
      exit(1);
    }
  }
  double t0 = 1e300, t1 = 0, flops = 0;
  for (int i = 0; i < nt; i++) {
    pthread_join(th[i], NULL);
    if (jobs[i].t0 < t0) t0 = jobs[i].t0;
    if (jobs[i].t1 > t1) t1 = jobs[i].t1;
    flops += jobs[i].flops;
    *sink += jobs[i].sink;
  }
  pthread_barrier_destroy(&bar);
  return flops / (t1 - t0) * 1e-9;
}

static void measure(const char *isa, kern_fn fn, int nt, int reps, double ms, const int *cpus,
                    double ghz) {
  /* calibrate iterations so that one repetition lasts about ms milliseconds */
  double f;
  float sink = 0;
  uint64_t iters = 1u << 16;
  for (;;) {
    double t0 = now();
    sink += fn(iters, 1.0f, &f);
    double dt = now() - t0;
    if (dt > 0.02 || iters > (1ull << 40)) {
      iters = (uint64_t)((double)iters * (ms * 1e-3) / dt) + 1;
      break;
    }
    iters *= 4;
  }
  double *g = malloc((size_t)reps * sizeof *g);
  for (int r = 0; r < reps; r++) g[r] = run_rep(fn, nt, iters, cpus, &sink);
  qsort(g, (size_t)reps, sizeof *g, cmp);
  double med = reps % 2 ? g[reps / 2] : 0.5 * (g[reps / 2 - 1] + g[reps / 2]);
  int width = fn == peak_fma512 ? 16 : 8;
  /* flops per cycle per thread at the clock measured by clock_ghz (2 FMA pipes x lanes x
   * 2 flops = 64 for zmm, 32 for ymm, when both FMA pipes are busy every cycle) */
  printf("RESULT bench=fma_peak isa=%s threads=%d gflops=%.1f min=%.1f max=%.1f per_thread=%.1f "
         "flops_per_cycle=%.1f of_max=%d reps=%d ms=%.0f%s\n",
         isa, nt, med, g[0], g[reps - 1], med / nt, ghz > 0 ? med / nt / ghz : 0.0, 2 * width * 2,
         reps, ms, sink == 12345.f ? " " : "");
  fflush(stdout);
  free(g);
}

int main(int argc, char **argv) {
  int threads = (int)sysconf(_SC_NPROCESSORS_ONLN), reps = 7;
  double ms = 200;
  const char *isa = "all";
  int pp_only = 0;
  for (int i = 1; i < argc; i++) {
    if (i + 1 < argc && !strcmp(argv[i], "--threads"))
      threads = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--reps"))
      reps = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--ms"))
      ms = atof(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--isa"))
      isa = argv[++i];
    else if (!strcmp(argv[i], "--pingpong-only"))
      pp_only = 1;
    else {
      fprintf(stderr,
              "usage: peak [--threads N] [--isa avx512|avx2|all] [--reps R] [--ms MS]\n"
              "            [--pingpong-only]\n"
              "  fp32 FMA peak (GFLOP/s) at 1 thread and at N threads (default: online CPUs),\n"
              "  and the round trip of a cache line between the first two CPUs\n");
      return 2;
    }
  }
  if (threads < 1 || threads > 256 || reps < 1 || reps > 1000 || !(ms > 0)) {
    fprintf(stderr, "peak: bad arguments\n");
    return 2;
  }
  int want512 = !strcmp(isa, "all") || !strcmp(isa, "avx512");
  int want256 = !strcmp(isa, "all") || !strcmp(isa, "avx2");
  if (!want512 && !want256) {
    fprintf(stderr, "peak: --isa must be avx512, avx2 or all\n");
    return 2;
  }
  __builtin_cpu_init();
  int has512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
  int has256 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");

  /* pin thread i to the i-th CPU this process may run on */
  int cpus[256], ncpu = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE && ncpu < 256; c++)
      if (CPU_ISSET(c, &set)) cpus[ncpu++] = c;
  const int *pin = ncpu >= threads ? cpus : NULL;
  if (!pin)
    fprintf(stderr, "peak: %d threads but only %d CPUs allowed; threads not pinned\n", threads,
            ncpu);

  if (pp_only) {
    if (ncpu >= 2) pingpong(cpus[0], cpus[1]);
    return 0;
  }
  double ghz = clock_ghz();
  printf("RESULT bench=clock ghz=%.2f method=dependent_integer_adds\n", ghz);
  if (pin && threads >= 2) pingpong(pin[0], pin[1]);
  int counts[2] = {1, threads}, nc = threads > 1 ? 2 : 1;
  for (int k = 0; k < nc; k++) {
    if (want512) {
      if (has512)
        measure("avx512", peak_fma512, counts[k], reps, ms, pin, ghz);
      else if (k == 0)
        printf("RESULT bench=fma_peak isa=avx512 unsupported=1\n");
    }
    if (want256) {
      if (has256)
        measure("avx2", peak_fma256, counts[k], reps, ms, pin, ghz);
      else if (k == 0)
        printf("RESULT bench=fma_peak isa=avx2 unsupported=1\n");
    }
  }
  return 0;
}
#endif
