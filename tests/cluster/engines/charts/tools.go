//go:build tools

// Package charts only keeps the chart modules in go.mod: `go mod tidy` drops a requirement no package imports.
// Each import is a small package of the module (its API types or a version helper); nothing is built.
package charts

import (
	_ "github.com/aws/karpenter-provider-aws/pkg/apis"
	_ "github.com/prometheus-operator/prometheus-operator/pkg/versionutil"
	_ "sigs.k8s.io/lws/api/leaderworkerset/v1"
	_ "sigs.k8s.io/metrics-server/pkg/api"
)
