"""What runs in the cluster: device plugins, autoscalers, training operators, monitoring, node quarantine, and the
pinned Helm charts, manifests and dashboards they install."""
