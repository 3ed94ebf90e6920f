// Not an engine (no engine.toml: build.py builds nothing here). The Go modules whose Helm charts and CRDs
// tests/cluster/charts.py reads from the module cache, at the version of each that holds the chart version the stack
// pins (infra/facts/versions.py). tools.go imports one small package of each, so `go mod tidy` keeps them.
// The Kubeflow Trainer and JobSet charts are read through ../kubeflow-trainer and ../jobset, which pin those modules.
module eks-ddp.local/engines/charts

// go 1.26.6, not 1.26: github.com/aws/karpenter-provider-aws@v1.14.1's go.mod says `go 1.26.6`; `go mod tidy` raises ours.
go 1.26.6

require (
	// karpenter chart 1.14.1 (KARPENTER_CHART) -> v1.14.1. Upstream publishes chart <tag without v> from the tag's
	// tree (github.com/aws/karpenter-provider-aws@v1.14.1 hack/release/release.sh: release "${git_tag#v}"), writing
	// Chart.yaml version/appVersion and values controller.image.{repository,tag,digest} just before `helm package`
	// (hack/release/common.sh: build, publishHelmChart): the tree's Chart.yaml still says 1.13.0, and its crds/ are
	// symbolic links to pkg/apis/crds/, which module zips leave out. charts.py does both, as the release does.
	github.com/aws/karpenter-provider-aws v1.14.1
	// The PodMonitor/ServiceMonitor/... CRDs that kube-prometheus-stack 88.5.3 (KUBE_PROMETHEUS_STACK_CHART) installs:
	// its appVersion is v0.93.1 (prometheus-community/helm-charts tag kube-prometheus-stack-88.5.3, commit ea930bae,
	// charts/kube-prometheus-stack/Chart.yaml), and its charts/crds/crds/crd-*.yaml are this module's
	// example/prometheus-operator-crd/monitoring.coreos.com_*.yaml byte for byte below a one-line source comment
	// (all ten compared). That chart itself is in no Go module: the helm-charts repository has no go.mod at that tag.
	github.com/prometheus-operator/prometheus-operator v0.93.1
	// lws chart 0.8.0: a dependency of the Kubeflow Trainer chart 2.3.0 (github.com/kubeflow/trainer/v2@v2.3.0
	// charts/kubeflow-trainer/Chart.yaml, condition dataCache.enabled,dataCache.lws.install, off in our values), which
	// Helm still wants present. Upstream packages the v0.8.0 tree's charts/lws with --version and --app-version set to
	// the tag and values image.manager.{repository,tag,pullPolicy} set (sigs.k8s.io/lws@v0.8.0 hack/push-chart.sh);
	// the tree's Chart.yaml says 0.1.0.
	sigs.k8s.io/lws v0.8.0
	// metrics-server chart 3.12.2 (METRICS_SERVER_CHART) -> v0.8.0, the only served version whose charts/metrics-server
	// says 3.12.2 (v0.7.2 holds 3.12.1; the proxy refuses the chart tag's commit metrics-server-helm-chart-3.12.2,
	// 65945d221ff1, as a pseudo-version). It is NOT the released 3.12.2 file for file: between that tag and v0.8.0 the
	// chart gained tls.* values (default tls.type "metrics-server": no change), podDisruptionBudget.
	// unhealthyPodEvictionPolicy (default unset) and addonResizer 1.8.23 (disabled). With the stack's values (and with
	// none) `helm template` of both gives the same objects but for an empty `annotations:` (null) on the APIService
	// (compared against the tag's charts/metrics-server with tests/cluster/engines/helm's Helm). v0.9.0 holds the
	// released chart 3.13.1 exactly (tag metrics-server-helm-chart-3.13.1: no diff under charts/metrics-server).
	sigs.k8s.io/metrics-server v0.8.0
)

require (
	cel.dev/expr v0.25.1 // indirect
	github.com/NYTimes/gziphandler v1.1.1 // indirect
	github.com/alecthomas/kingpin/v2 v2.4.0 // indirect
	github.com/alecthomas/units v0.0.0-20240927000941-0f3dac36c52b // indirect
	github.com/antlr4-go/antlr/v4 v4.13.0 // indirect
	github.com/awslabs/operatorpkg v0.0.0-20260708223819-4da4c353c5fa // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/blang/semver/v4 v4.0.0 // indirect
	github.com/cenkalti/backoff/v5 v5.0.3 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/coreos/go-semver v0.3.1 // indirect
	github.com/coreos/go-systemd/v22 v22.7.0 // indirect
	github.com/davecgh/go-spew v1.1.2-0.20180830191138-d8f796af33cc // indirect
	github.com/emicklei/go-restful/v3 v3.13.0 // indirect
	github.com/evanphx/json-patch/v5 v5.9.11 // indirect
	github.com/felixge/httpsnoop v1.1.0 // indirect
	github.com/fsnotify/fsnotify v1.10.1 // indirect
	github.com/fxamacker/cbor/v2 v2.9.2 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/go-openapi/jsonpointer v0.23.1 // indirect
	github.com/go-openapi/jsonreference v0.21.6 // indirect
	github.com/go-openapi/swag v0.26.1 // indirect
	github.com/go-openapi/swag/cmdutils v0.26.1 // indirect
	github.com/go-openapi/swag/conv v0.26.1 // indirect
	github.com/go-openapi/swag/fileutils v0.26.1 // indirect
	github.com/go-openapi/swag/jsonname v0.26.1 // indirect
	github.com/go-openapi/swag/jsonutils v0.26.1 // indirect
	github.com/go-openapi/swag/loading v0.26.1 // indirect
	github.com/go-openapi/swag/mangling v0.26.1 // indirect
	github.com/go-openapi/swag/netutils v0.26.1 // indirect
	github.com/go-openapi/swag/stringutils v0.26.1 // indirect
	github.com/go-openapi/swag/typeutils v0.26.1 // indirect
	github.com/go-openapi/swag/yamlutils v0.26.1 // indirect
	github.com/gogo/protobuf v1.3.2 // indirect
	github.com/golang/protobuf v1.5.4 // indirect
	github.com/google/cel-go v0.26.0 // indirect
	github.com/google/gnostic-models v0.7.1 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus v1.1.0 // indirect
	github.com/grpc-ecosystem/go-grpc-middleware/v2 v2.3.3 // indirect
	github.com/grpc-ecosystem/grpc-gateway/v2 v2.29.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/kylelemons/godebug v1.1.0 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.3-0.20250322232337-35a7c28c31ee // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/pmezard/go-difflib v1.0.1-0.20181226105442-5d4384ee4fb2 // indirect
	github.com/prometheus/client_golang v1.24.1 // indirect
	github.com/prometheus/client_model v0.6.2 // indirect
	github.com/prometheus/common v0.70.1 // indirect
	github.com/prometheus/procfs v0.21.1 // indirect
	github.com/samber/lo v1.53.0 // indirect
	github.com/spf13/cobra v1.10.2 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
	github.com/stoewer/go-strcase v1.3.0 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	github.com/xhit/go-str2duration/v2 v2.1.0 // indirect
	go.etcd.io/etcd/api/v3 v3.6.8 // indirect
	go.etcd.io/etcd/client/pkg/v3 v3.6.8 // indirect
	go.etcd.io/etcd/client/v3 v3.6.8 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc v0.65.0 // indirect
	go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp v0.69.0 // indirect
	go.opentelemetry.io/otel v1.44.0 // indirect
	go.opentelemetry.io/otel/exporters/otlp/otlptrace v1.44.0 // indirect
	go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc v1.44.0 // indirect
	go.opentelemetry.io/otel/metric v1.44.0 // indirect
	go.opentelemetry.io/otel/sdk v1.44.0 // indirect
	go.opentelemetry.io/otel/trace v1.44.0 // indirect
	go.opentelemetry.io/proto/otlp v1.10.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	go.uber.org/zap v1.28.0 // indirect
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	go.yaml.in/yaml/v3 v3.0.4 // indirect
	golang.org/x/crypto v0.54.0 // indirect
	golang.org/x/exp v0.0.0-20260611194520-c48552f49976 // indirect
	golang.org/x/net v0.57.0 // indirect
	golang.org/x/oauth2 v0.36.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/term v0.45.0 // indirect
	golang.org/x/text v0.40.0 // indirect
	golang.org/x/time v0.15.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20260615183401-62b3387ff324 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260615183401-62b3387ff324 // indirect
	google.golang.org/grpc v1.82.1 // indirect
	google.golang.org/protobuf v1.36.12-0.20260120151049-f2248ac996af // indirect
	gopkg.in/evanphx/json-patch.v4 v4.13.0 // indirect
	gopkg.in/inf.v0 v0.9.1 // indirect
	k8s.io/api v0.36.3 // indirect
	k8s.io/apiextensions-apiserver v0.36.3 // indirect
	k8s.io/apimachinery v0.36.3 // indirect
	k8s.io/apiserver v0.36.3 // indirect
	k8s.io/client-go v0.36.3 // indirect
	k8s.io/component-base v0.36.3 // indirect
	k8s.io/klog/v2 v2.140.0 // indirect
	k8s.io/kube-openapi v0.0.0-20260603220949-865597e52e25 // indirect
	k8s.io/metrics v0.33.2 // indirect
	k8s.io/streaming v0.36.3 // indirect
	k8s.io/utils v0.0.0-20260507154919-ff6756f316d2 // indirect
	sigs.k8s.io/apiserver-network-proxy/konnectivity-client v0.34.0 // indirect
	sigs.k8s.io/controller-runtime v0.24.1 // indirect
	sigs.k8s.io/json v0.0.0-20250730193827-2d320260d730 // indirect
	sigs.k8s.io/randfill v1.0.0 // indirect
	sigs.k8s.io/structured-merge-diff/v6 v6.4.0 // indirect
	sigs.k8s.io/yaml v1.6.0 // indirect
)
