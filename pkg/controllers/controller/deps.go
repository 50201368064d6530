package controller

import (
	"go.uber.org/zap"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/record"

	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	mzinformers "github.com/materializeinc/orchestratord/pkg/client/informers/externalversions"
	"github.com/materializeinc/orchestratord/pkg/kubeclient"
)

// Deps are what a reconciler is built from. KubeInformers only see objects
// labelled with the resource id label; MZInformers see every CR.
type Deps struct {
	Kube kubeclient.Interface
	MZ   versioned.Interface
	// Dynamic reads and writes cert-manager Certificates, whose CRD may be
	// absent.
	Dynamic       dynamic.Interface
	KubeInformers *ChildInformers
	MZInformers   mzinformers.SharedInformerFactory
	Recorder      record.EventRecorder
	Log           *zap.Logger
	Metrics       *Metrics
	Workers       int
}
