"""Analysis of measured runs: QoS verdicts, application metrics, scoring."""
