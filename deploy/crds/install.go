package crds

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// Install creates or updates every CRD in All on the cluster config reaches
// and waits until the API server serves each one (Established). The local
// stack and the tests that run a control plane install them this way; on a
// real cluster the Helm chart does.
func Install(ctx context.Context, config *rest.Config) error {
	client, err := apiextensionsclient.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("installing CRDs: %w", err)
	}
	api := client.ApiextensionsV1().CustomResourceDefinitions()
	for file, data := range All() {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			return fmt.Errorf("installing CRDs: %s: %w", file, err)
		}
		existing, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = api.Create(ctx, &crd, metav1.CreateOptions{})
		case err == nil:
			crd.ResourceVersion = existing.ResourceVersion
			_, err = api.Update(ctx, &crd, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("installing CRD %s: %w", crd.Name, err)
		}
		err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("installing CRD %s: not established: %w", crd.Name, err)
		}
	}
	return nil
}
