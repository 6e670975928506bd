"""salusbench: the paper's experiments over simgpu, and their report.

Modules, one seam each:
  config      the three sizes of a run (full, quick, tiny) and the paths
  presets     the workload figures, read from salus-train's preset table
  tracegen    what to run: the training trace, the tuning set, the services
  runner      running jobs over simgpu with or without libsalus
  analysis    what a run's results and kernel trace say (JCT, utilization)
  ideal       the offline preemptive SRTF schedule of a trace
  training, hyperparam, inference, mixed, slicing, micro
              the experiments: run, analyse, write <name>.json
  plots       PNG figures (matplotlib; skipped cleanly without it)
  report      report.md and summary.json from the experiments' JSON
"""
