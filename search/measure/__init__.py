"""What a trial is measured with: hardware facts, fingerprint, NVML, CPU/GPU telemetry, MFU."""
