"""testbed: what plays the cluster's controllers for this module in tests and in `make dev`.

kubeemu (beside this package) is a generic API server: it stores objects and serves watches, and
nothing in it acts on them or knows this module. A real cluster also runs controllers that turn
objects into running things: the Job controller and the kubelet run a Job's Pod, the Deployment
controller rolls out ReplicaSets, a provisioner binds a PersistentVolumeClaim. Tests of the module
need those reactions, so this package plays them, one stand-in controller per module:

- jobrunner      the Job controller + the kubelet of one node for Jobs with an image it can run
                 (local processes; see its docstring for what is and is not emulated)
- module         what the stand-ins must know of this module (image digest, entry point, settings
                 prefix, termination-message variable): the one place that fills in their parameters
- workloads      the Deployment, ReplicaSet, StatefulSet, DaemonSet, CronJob controllers and the Job
                 controller for Jobs the runner does not run
- scheduler      kube-scheduler (scheduling gates, unbound claims, node selection) and the kubelets
                 that report other images' Pods Running without running anything
- volumes        the PV controller and a provisioner per StorageClass as a test configures it
                 (directories as volumes); `mounts` says which directory a claim mount would show
- csi_kubelet    kubelet's CSI volume manager for inline volumes: NodePublish/NodeUnpublish over each
                 node's plugin socket, with kubelet's request, retries, FailedMount Events and hold on
                 the Pod until teardown (the plugin, a real process, does the mounts)
- reactor, simulation   the watch-and-reconcile loop they share, and all of them started together
- access_levels  Deckhouse's user-authz levels as RBAC bindings on the module's rendered roles
- platform_roles the rbacv2 roles user-authz ships (legacy use/manage before 1.78, namespace/
                 subsystem/system from 1.78) that aggregate the module's capabilities
- pytest_fixtures, devstack   the `job_runner` and `cluster_simulation` fixtures, and `make dev`
                 (`python -m testbed.devstack`)

The pattern for the next stand-ins (issue 12: a Deployment controller, a PV binder, a kubelet for
Deployment Pods), as `jobrunner` does it:

1. One module per controller, `testbed/<controller>.py`, with one class built on a running emulator
   (`RunningEmulator` in tests, `jobrunner.ServedCluster` in `make dev`) and keyword-only
   parameters. It knows Kubernetes, not ai-models: whatever is module-specific (an image, a program
   name, an environment variable) is a parameter, filled in by `testbed.module`.
2. It reads the store in-process through a store subscription (`cluster.store.subscribe`: the
   current objects as ADDED, then every change), never by polling, and writes the way a controller
   does, through `cluster.create/update/delete`, status through the status subresource, so kubectl
   and the module see what a cluster would show.
3. It does its work in its own threads and holds the store lock only for single writes; it is a
   context manager whose `close()` stops its threads and kills what it started.
4. Test controls (pause, kill, wait) are methods; waits wake on the controller's own changes, or
   poll a file with `support.eventually`. No fixed sleeps.
5. Its docstring says what it emulates and, deliberately, what it does not; its tests live next to
   it, `testbed/test_<controller>.py`, against a real emulator, and a fixture for it goes into
   `testbed/pytest_fixtures.py` (re-exported by tests/conftest.py).
"""
