package controllers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

// indexNode indexes SealBatches by status.node.
const indexNode = "status.node"

func setupIndexes(mgr ctrl.Manager) error {
	return mgr.GetFieldIndexer().IndexField(context.Background(), &sealv1.SealBatch{}, indexNode, func(o client.Object) []string {
		if n := o.(*sealv1.SealBatch).Status.Node; n != "" {
			return []string{n}
		}
		return nil
	})
}

// batchesOnNode lists the batches placed on a node as reconcile requests.
func batchesOnNode(ctx context.Context, c client.Client, node string) []reconcile.Request {
	var list sealv1.SealBatchList
	if err := c.List(ctx, &list, client.MatchingFields{indexNode: node}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: list.Items[i].Namespace, Name: list.Items[i].Name}})
	}
	return out
}

// nodeGoneOrUncordoned passes a Node's deletion (its batches fail) and its uncordon (attempts
// waiting on it start).
var nodeGoneOrUncordoned = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Node)
		n, ok2 := e.ObjectNew.(*corev1.Node)
		return ok1 && ok2 && o.Spec.Unschedulable && !n.Spec.Unschedulable
	},
}

// deletedOnly passes delete events only.
var deletedOnly = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	UpdateFunc:  func(event.UpdateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
}
