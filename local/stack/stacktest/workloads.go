package stacktest

import (
	"flag"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Main is a TestMain body for a package whose tests need the stack: under
// -short it only runs m (those tests skip), otherwise withStack, which
// starts the stack, runs m and stops everything. It returns the exit code.
//
//	func TestMain(m *testing.M) { os.Exit(stacktest.Main(m, runWithStack)) }
func Main(m *testing.M, withStack func(*testing.M) int) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	if testing.Short() {
		return m.Run()
	}
	return withStack(m)
}

// PauseImage is the image of the pods the tests make: kwok runs no
// containers, but the pods look like the walkthrough's.
const PauseImage = "public.ecr.aws/eks-distro/kubernetes/pause:3.2"

// PausePodSpec is one pause container requesting cpu and 128Mi of memory,
// with no termination grace period, so an evicted or deleted pod goes at
// once. Callers add the node selector and tolerations of their pool.
func PausePodSpec(cpu string) corev1.PodSpec {
	return corev1.PodSpec{
		TerminationGracePeriodSeconds: ptr.To[int64](0),
		Containers: []corev1.Container{{
			Name:  "pause",
			Image: PauseImage,
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(cpu),
				corev1.ResourceMemory: resource.MustParse("128Mi"),
			}},
		}},
	}
}

// Deployment builds (does not create) a Deployment in namespace of
// replicas pods of spec, labelled and selected by app=name.
func Deployment(namespace, name string, replicas int32, spec corev1.PodSpec) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       spec,
			},
		},
	}
}
