/* src/threads.c — the persistent thread pool of a workspace: spin-then-sleep workers pinned to
 * CPUs, work items claimed as they go, elementwise work cut at fixed points. */
#include "internal.h"

/* ---------------------------------------------------------------- thread pool */
/* A persistent pool: workers wait for a new generation number, run the task, and
 * count down `pending`. Between the steps of a training run the wait is short, so a
 * worker first spins on the atomic counter (no system call, a few microseconds to
 * start a step) and only then sleeps on the condition variable. */

/* Elementwise work on n elements split over the workers: part w of `parts` (at most
 * SC__OPT_PARTS) is [*k0, *k1), cut at multiples of 64 but for the end, so that every element
 * gets the same operations whatever the split (vector bodies, not tails) */
SC__INT size_t sc__parts(int nworkers) {
  return (size_t)nworkers < SC__OPT_PARTS ? (size_t)nworkers : SC__OPT_PARTS;
}
SC__INT void sc__part_range(size_t w, size_t parts, size_t n, size_t *k0, size_t *k1) {
  *k0 = (w * n / parts) & ~(size_t)63;
  *k1 = w + 1 < parts ? ((w + 1) * n / parts) & ~(size_t)63 : n;
}

#if SC__THREADS
#include <sched.h>
#include <stdatomic.h>
#define SC__SPIN 20000 /* polls before a waiting thread starts yielding */
/* How long a worker polls for the next run before it sleeps on the condition variable. The
 * serial part of a training step (LeNet5: ADAM on 44,426 parameters, the guard's scan, the
 * slices' reduction) takes tens of microseconds; a worker that had gone to sleep by then
 * needed a futex wake (a system call, and an inter-processor interrupt under a hypervisor)
 * and started each step late: LeNet5 at batch 64 on 2 threads made 3 futex calls and 30
 * sched_yield calls per step (the caller waiting for the late worker). 20,000 polls
 * (about 10 us) was the limit before; now the worker polls that often, then yields between
 * polls until SC__SPIN_NS have passed. */
#define SC__SPIN_NS 1000000u /* 1 ms */
#endif

typedef struct sc__pool {
  int nthreads; /* total workers including the caller */
#if SC__THREADS
  pthread_t *th;
  pthread_mutex_t mu;
  pthread_cond_t cv_go;
  atomic_ulong gen;
  atomic_int pending;
  atomic_int stop;
  atomic_size_t next; /* the next work item to claim (sc__pool_claim), reset per run */
  sc__task_fn fn;
  void *arg;
#if defined(__linux__) && defined(CPU_SET)
  int home;          /* pinned workers: the CPU left for the calling thread, else -1 */
  cpu_set_t wcpus;   /* the CPUs the workers are pinned to */
  uint64_t nudge_ns; /* when the calling thread was last moved home (sc__pool_nudge) */
#endif
#endif
} sc__pool;

#if SC__THREADS
typedef struct sc__worker_arg {
  sc__pool *pool;
  int id;
} sc__worker_arg;

static void *sc__worker_main(void *vp) {
  sc__worker_arg *wa = vp;
  sc__pool *P = wa->pool;
  int id = wa->id;
  unsigned long seen = 0;
  for (;;) {
    unsigned spins = 0;
    uint64_t until = 0;
    while (atomic_load_explicit(&P->gen, memory_order_acquire) == seen &&
           !atomic_load_explicit(&P->stop, memory_order_acquire)) {
      if (++spins < SC__SPIN) continue;
      /* then yield between polls, so that a thread with work on this CPU (more threads
       * than CPUs) gets it, until the time is up */
      uint64_t now = sc__ns();
      if (!until)
        until = now + SC__SPIN_NS;
      else if (now > until)
        break;
      sched_yield();
    }
    if (atomic_load_explicit(&P->gen, memory_order_acquire) == seen &&
        !atomic_load_explicit(&P->stop, memory_order_acquire)) {
      pthread_mutex_lock(&P->mu);
      while (atomic_load(&P->gen) == seen && !atomic_load(&P->stop))
        pthread_cond_wait(&P->cv_go, &P->mu);
      pthread_mutex_unlock(&P->mu);
    }
    if (atomic_load_explicit(&P->stop, memory_order_acquire)) return NULL;
    seen = atomic_load_explicit(&P->gen, memory_order_acquire);
    P->fn(P->arg, id, P->nthreads);
    atomic_fetch_sub_explicit(&P->pending, 1, memory_order_acq_rel);
  }
}
#endif

SC__INT void sc__pool_destroy(sc__pool *P) {
  if (!P) return;
#if SC__THREADS
  if (P->th) {
    pthread_mutex_lock(&P->mu);
    atomic_store(&P->stop, 1);
    pthread_cond_broadcast(&P->cv_go);
    pthread_mutex_unlock(&P->mu);
    for (int i = 0; i < P->nthreads - 1; i++) pthread_join(P->th[i], NULL);
    pthread_cond_destroy(&P->cv_go);
    pthread_mutex_destroy(&P->mu);
    free(P->th);
  }
#endif
  free(P);
}

#if SC__THREADS
SC__INT sc_status sc__pool_create(sc__pool **out, int nthreads) {
  *out = NULL;
  /* worker args live right after the pool struct */
  sc__pool *P = calloc(1, sizeof(sc__pool) + (size_t)nthreads * sizeof(sc__worker_arg));
  if (!P) return sc__fail(SC_ERR_NOMEM, "sc_workspace_set_threads", "out of memory");
  P->nthreads = nthreads;
  P->th = calloc((size_t)nthreads, sizeof(pthread_t));
  if (!P->th) {
    free(P);
    return sc__fail(SC_ERR_NOMEM, "sc_workspace_set_threads", "out of memory");
  }
  atomic_init(&P->gen, 0);
  atomic_init(&P->pending, 0);
  atomic_init(&P->stop, 0);
  atomic_init(&P->next, 0);
  pthread_mutex_init(&P->mu, NULL);
  pthread_cond_init(&P->cv_go, NULL);
  sc__worker_arg *wa = (sc__worker_arg *)(P + 1);
#if defined(__linux__) && defined(CPU_SET)
  P->home = -1;
  CPU_ZERO(&P->wcpus);
#endif
  for (int i = 0; i < nthreads - 1; i++) {
    wa[i].pool = P;
    wa[i].id = i + 1;
    if (pthread_create(&P->th[i], NULL, sc__worker_main, &wa[i]) != 0) {
      P->nthreads = i + 1; /* join the ones that started */
      sc__pool_destroy(P);
      return sc__fail(SC_ERR_THREAD, "sc_workspace_set_threads",
                      "pthread_create failed for worker %d of %d", i + 1, nthreads);
    }
  }
#if defined(__linux__) && defined(CPU_SET)
  /* Pinning: worker k runs on the k-th CPU (cyclically) of the ones this process may use,
   * so workers do not migrate between steps; the calling thread is not pinned, only moved
   * off a worker's CPU when found there (sc__pool_nudge). SC_PIN=0
   * turns it off. A failure to pin is not an error (the threads run unpinned). */
  const char *pin = getenv("SC_PIN");
  if (!(pin && strcmp(pin, "0") == 0)) {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
      int cpus[CPU_SETSIZE], nc = 0;
      for (int k = 0; k < CPU_SETSIZE; k++)
        if (CPU_ISSET(k, &allowed)) cpus[nc++] = k;
      for (int i = 0; nc > 1 && i < nthreads - 1; i++) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus[(i + 1) % nc], &one);
        if (pthread_setaffinity_np(P->th[i], sizeof one, &one) == 0)
          CPU_SET(cpus[(i + 1) % nc], &P->wcpus);
      }
      /* the first CPU is the calling thread's when no worker got it */
      if (nc > 1 && nthreads <= nc && !CPU_ISSET(cpus[0], &P->wcpus)) P->home = cpus[0];
    }
  }
#endif
  *out = P;
  return SC_OK;
}
#endif

/* the workers of a pool, the caller included */
SC__INT int sc__pool_threads(const sc__pool *P) { return P->nthreads; }

/* the next work item of the current run, for workers that take items as they go (called
 * only from a task run with nworkers > 1) */
SC__INT size_t sc__pool_claim(sc__pool *P) {
#if SC__THREADS
  return atomic_fetch_add_explicit(&P->next, 1, memory_order_relaxed);
#else
  (void)P;
  return SIZE_MAX;
#endif
}

#if SC__THREADS && defined(__linux__) && defined(CPU_SET)
/* The calling thread is not pinned, and the scheduler sometimes runs it on a pinned worker's
 * CPU: that worker then waits for the caller's share of each run before it can do its own
 * (LeNet5, 2 threads, Zen 4 KVM guest: runs of 15-50 consecutive steps, about 3.7 % of the
 * steps of an epoch, each 0.6-1.1 ms longer, until the load balancer moved the caller; 2-7 %
 * of the epoch). When it is found there, it is moved to its own CPU (home) by narrowing its
 * affinity to that CPU, which migrates it at once, and then restoring its affinity as it was.
 * Not when the thread's own affinity excludes home (the user's choice), and at most once a
 * millisecond (a CPU shared by more threads than it can run: the move would not last). */
static void sc__pool_nudge(sc__pool *P) {
  int cpu = P->home < 0 ? -1 : sched_getcpu();
  if (cpu < 0 || cpu == P->home || !CPU_ISSET(cpu, &P->wcpus)) return;
  uint64_t now = sc__ns();
  if (P->nudge_ns && now - P->nudge_ns < 1000000u) return;
  P->nudge_ns = now;
  cpu_set_t mine, one;
  if (sched_getaffinity(0, sizeof mine, &mine) != 0 || !CPU_ISSET(P->home, &mine)) return;
  CPU_ZERO(&one);
  CPU_SET(P->home, &one);
  if (sched_setaffinity(0, sizeof one, &one) == 0) (void)sched_setaffinity(0, sizeof mine, &mine);
}
#endif

/* run fn on every worker (the caller is worker 0) and wait for all */
SC__INT void sc__pool_run(sc__pool *P, sc__task_fn fn, void *arg) {
  if (!P || P->nthreads <= 1) {
    fn(arg, 0, 1);
    return;
  }
#if SC__THREADS
#if defined(__linux__) && defined(CPU_SET)
  sc__pool_nudge(P);
#endif
  P->fn = fn;
  P->arg = arg;
  atomic_store_explicit(&P->next, 0, memory_order_relaxed);
  atomic_store_explicit(&P->pending, P->nthreads - 1, memory_order_relaxed);
  pthread_mutex_lock(&P->mu); /* the lock orders gen against a worker going to sleep */
  atomic_fetch_add_explicit(&P->gen, 1, memory_order_release);
  pthread_cond_broadcast(&P->cv_go);
  pthread_mutex_unlock(&P->mu);
  fn(arg, 0, P->nthreads);
  for (unsigned long spins = 0; atomic_load_explicit(&P->pending, memory_order_acquire) > 0;
       spins++)
    if (spins > SC__SPIN) sched_yield();
#endif
}
