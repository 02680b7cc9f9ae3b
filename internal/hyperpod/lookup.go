package hyperpod

import (
	"github.com/capstan-dev/capstan/internal/store"
)

// ClusterByID finds the cluster with id (its ARN's last part) inside tx,
// for packages that keep state about clusters in the same store and must
// read the cluster in their own transaction (tags). found is false when
// there is none.
func ClusterByID(tx *store.Tx, id string) (c Cluster, found bool, err error) {
	recs, err := store.List[record](tx, KindCluster)
	if err != nil {
		return Cluster{}, false, err
	}
	for _, r := range recs {
		if r.ID == id {
			return r.Cluster, true, nil
		}
	}
	return Cluster{}, false, nil
}
