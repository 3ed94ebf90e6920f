"""Volumes standing in for what the stack's CSI drivers would provision: FSx for Lustre and EFS need AWS.

For each claim the stack makes without naming a volume, one PersistentVolume of the claim's class, size and access
modes, reserved for it by `claimRef`: the PV controller binds the two and the scheduler's volume binding checks them,
as they would a provisioned volume. Its CSI driver is the class's provisioner; nothing ever mounts it (KWOK).
"""

from typing import Any

from eks_ddp.engine_models.base import Deployment

CLAIM = "kubernetes:core/v1:PersistentVolumeClaim"
CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"
VOLUME = "kubernetes:core/v1:PersistentVolume"


def stand_in_volumes(deployment: Deployment) -> list[dict[str, Any]]:
    """One PersistentVolume per claim that names none and that no volume of the stack names."""
    provisioners = {
        c.sent["metadata"]["name"]: c.sent.get("provisioner", "") for c in deployment.of_type(CLASS)
    }
    claimed = {
        (ref.get("namespace"), ref.get("name"))
        for v in deployment.of_type(VOLUME)
        if (ref := v.sent.get("spec", {}).get("claimRef"))
    }
    volumes = []
    for claim in deployment.of_type(CLAIM):
        meta, spec = claim.sent["metadata"], claim.sent.get("spec", {})
        namespace = meta.get("namespace", "default")
        if spec.get("volumeName") or (namespace, meta["name"]) in claimed:
            continue
        storage_class = spec.get("storageClassName", "")
        volumes.append({
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": f"stand-in-{namespace}-{meta['name']}"},
            "spec": {
                "capacity": {"storage": spec["resources"]["requests"]["storage"]},
                "accessModes": spec.get("accessModes", ["ReadWriteOnce"]),
                "storageClassName": storage_class,
                "persistentVolumeReclaimPolicy": "Retain",
                "claimRef": {"namespace": namespace, "name": meta["name"]},
                "csi": {"driver": provisioners.get(storage_class) or "stand-in.eks-ddp.local",
                        "volumeHandle": f"stand-in-{namespace}-{meta['name']}"},
            },
        })
    return volumes
