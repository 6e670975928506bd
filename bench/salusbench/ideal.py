"""The ideal preemptive SRTF schedule of a trace, computed offline.

One GPU, zero switching cost, no memory limit, perfect knowledge of every
job's length: at every arrival or completion the job with the least
remaining work runs (ties: earlier arrival).  A job's work is its
standalone length (GPU and host time of all its iterations), so the GPU
is "busy" for the GPU part only.  This is the limit srtf is compared with.
"""
import heapq

from .analysis import mean, percentile


def srtf(jobs):
    """jobs: [(arrival_s, length_s, gpu_s)] -> [completion_s] in input order."""
    order = sorted(range(len(jobs)), key=lambda i: (jobs[i][0], i))
    done = [None] * len(jobs)
    ready = []                      # (remaining, arrival, index)
    t = 0.0
    k = 0
    while k < len(order) or ready:
        if not ready:
            t = max(t, jobs[order[k]][0])
        while k < len(order) and jobs[order[k]][0] <= t:
            i = order[k]
            heapq.heappush(ready, (jobs[i][1], jobs[i][0], i))
            k += 1
        rem, arr, i = heapq.heappop(ready)
        nxt = jobs[order[k]][0] if k < len(order) else float("inf")
        if t + rem <= nxt:
            t += rem
            done[i] = t
        else:
            heapq.heappush(ready, (rem - (nxt - t), arr, i))
            t = nxt
    return done


def _srtf_admitting(jobs, admit, release=None):
    """SRTF among admitted jobs only.  At every arrival and completion
    admit(queue, rem) moves jobs from `queue` (arrived, not admitted, in
    arrival order) into `rem` (job -> work left); release(i) is told when
    job i ends.  jobs: [(arrival_s, length_s, peak)] -> [completion_s]."""
    order = sorted(range(len(jobs)), key=lambda i: (jobs[i][0], i))
    done = [None] * len(jobs)
    rem = {}
    queue = []
    t = 0.0
    k = 0
    while k < len(order) or queue or rem:
        while k < len(order) and jobs[order[k]][0] <= t:
            queue.append(order[k])
            k += 1
        admit(queue, rem)
        nxt = jobs[order[k]][0] if k < len(order) else float("inf")
        if not rem:
            t = nxt
            continue
        i = min(rem, key=lambda j: (rem[j], jobs[j][0], j))
        if t + rem[i] <= nxt:
            t += rem.pop(i)
            done[i] = t
            if release:
                release(i)
        else:
            rem[i] -= nxt - t
            t = nxt
    return done


def srtf_admitted(jobs, budget):
    """The same, but a job runs only once admitted: admission in arrival
    order while the peaks of admitted jobs fit in `budget` (what memory
    reservations impose on our srtf).  jobs: [(arrival_s, length_s, peak)]."""
    used = [0]

    def admit(queue, rem):
        while queue and used[0] + jobs[queue[0]][2] <= budget:
            i = queue.pop(0)
            used[0] += jobs[i][2]
            rem[i] = jobs[i][1]
        if queue and not rem:       # can never fit: run it alone
            i = queue.pop(0)
            used[0] += jobs[i][2]
            rem[i] = jobs[i][1]

    def release(i):
        used[0] -= jobs[i][2]
    return _srtf_admitting(jobs, admit, release)


def srtf_contexts(jobs, budget, ctx):
    """The same as srtf, but each live job holds a context of `ctx` bytes
    that nothing can move, and paging is free: a job is admitted (in SRTF
    order) while the live jobs' contexts and room for the largest peak
    admitted so far, or its own, fit in `budget`, as libsalus admits with
    paging on.  jobs: [(arrival_s, length_s, peak)]."""
    seen = [0]

    def admit(queue, rem):
        for i in sorted(queue, key=lambda i: (jobs[i][1], jobs[i][0], i)):
            largest = max([jobs[j][2] for j in rem] + [seen[0], jobs[i][2]])
            if (len(rem) + 1) * ctx + largest <= budget or not rem:
                queue.remove(i)
                rem[i] = jobs[i][1]
                seen[0] = max(seen[0], jobs[i][2])
    return _srtf_admitting(jobs, admit)


def stats(trace_jobs):
    """The policy figures of the ideal schedule of Job objects."""
    jobs = [(j.arrival_s, j.length_s, j.gpu_s) for j in trace_jobs]
    done = srtf(jobs)
    jct = [d - a for d, (a, _, _) in zip(done, jobs)]
    first = min(a for a, _, _ in jobs)
    span = max(done) - first
    return {"avg_jct_s": mean(jct), "p95_jct_s": percentile(jct, 95), "makespan_s": span,
            "utilization": sum(g for _, _, g in jobs) / span if span > 0 else None,
            "failed_jobs": 0, "completed_jobs": len(jobs),
            "median_jct_s": percentile(jct, 50)}, jct


def admitted_stats(trace_jobs, budget):
    """Average and p95 JCT of srtf_admitted."""
    done = srtf_admitted([(j.arrival_s, j.length_s, j.peak) for j in trace_jobs], budget)
    jct = [d - j.arrival_s for d, j in zip(done, trace_jobs)]
    return {"avg_jct_s": mean(jct), "p95_jct_s": percentile(jct, 95),
            "makespan_s": max(done) - min(j.arrival_s for j in trace_jobs)}


def contexts_stats(trace_jobs, budget, ctx):
    """Average and p95 JCT of srtf_contexts."""
    done = srtf_contexts([(j.arrival_s, j.length_s, j.peak) for j in trace_jobs], budget, ctx)
    jct = [d - j.arrival_s for d, j in zip(done, trace_jobs)]
    return {"avg_jct_s": mean(jct), "p95_jct_s": percentile(jct, 95),
            "makespan_s": max(done) - min(j.arrival_s for j in trace_jobs),
            "context_gib": ctx / 2**30}


def fifo_stats(trace_jobs):
    """The same offline model run in arrival order (no preemption): the
    ideal of `fifo`, to tell our overheads from the policies' effect."""
    t = 0.0
    jct = []
    for j in sorted(trace_jobs, key=lambda j: j.arrival_s):
        t = max(t, j.arrival_s) + j.length_s
        jct.append(t - j.arrival_s)
    first = min(j.arrival_s for j in trace_jobs)
    return {"avg_jct_s": mean(jct), "p95_jct_s": percentile(jct, 95), "makespan_s": t - first}
