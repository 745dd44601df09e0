"""``wattbench doctor``: is this machine, this server and this deployment ready to measure?

``service.run_doctor(target, sensors, ...) -> DoctorReport`` runs the groups in order: environment
(``environment``: GPU state through NVML, read only; Python, torch, vLLM/SGLang; sensors), server
(``server``, with a target), the serving release checklist (``checklist``), and — with ``run_dir``
— the troubleshooting order applied to a failed run (``troubleshoot.diagnose_failure``). The
report and its checks are ``check``. Nothing here changes a GPU setting.
"""
