"""kanedyn's benchmark suite against Pinocchio and MuJoCo: ``python -m benchmarks.run``."""
