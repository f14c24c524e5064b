"""Node processes: ``python -m rlinf_ros.nodes.<robot|camera|policy_client> --config X``."""
