package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"golang.org/x/sys/unix"

	"github.com/sealfleet/sealfleet/internal/render"
)

// blkioRoot is the cgroup v1 blkio hierarchy the kubelet (cgroupfs driver) puts pods under.
const blkioRoot = "/sys/fs/cgroup/blkio"

// blkioThrottle caps the block I/O of a batch's sealer pod at a few bytes per second on one
// disk, the way an admin would throttle a noisy tenant: cgroup v1 blkio.throttle.*_bps_device.
// Limits in cgroup v1 are not inherited by child cgroups, so every cgroup of the pod (the pod's
// and each container's) gets them, as soon as it appears: an unthrottled sealer labels an
// 8 MiB layer in under a second, so the poll is tight.
type blkioThrottle struct {
	dev string // "major:minor" of the whole disk
	bps int64

	mu      sync.Mutex
	touched map[string]bool
	lifted  bool
}

// newBlkioThrottle throttles the disk that holds path (a layer file or block device).
func newBlkioThrottle(path string, bps int64) (*blkioThrottle, error) {
	if _, err := os.Stat(filepath.Join(blkioRoot, "kubepods")); err != nil {
		return nil, fmt.Errorf("no cgroup v1 blkio hierarchy with kubepods at %s: %v", blkioRoot, err)
	}
	dev, err := diskOf(path)
	if err != nil {
		return nil, err
	}
	return &blkioThrottle{dev: dev, bps: bps, touched: map[string]bool{}}, nil
}

// diskOf is the "major:minor" of the whole disk under path: a block device itself, or the
// device of the filesystem holding a file; partitions resolve to their disk (blk-throttle
// takes whole disks only).
func diskOf(path string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return "", fmt.Errorf("stat %s: %w", path, err)
	}
	dev := st.Dev
	if st.Mode&unix.S_IFMT == unix.S_IFBLK {
		dev = st.Rdev
	}
	if unix.Major(dev) == 0 {
		return "", fmt.Errorf("%s is on a filesystem without a block device (%d:%d): nothing to throttle", path, unix.Major(dev), unix.Minor(dev))
	}
	mm := fmt.Sprintf("%d:%d", unix.Major(dev), unix.Minor(dev))
	sys := filepath.Join("/sys/dev/block", mm)
	if _, err := os.Stat(filepath.Join(sys, "partition")); err == nil {
		parent, err := filepath.EvalSymlinks(filepath.Join(sys, ".."))
		if err != nil {
			return "", err
		}
		b, err := os.ReadFile(filepath.Join(parent, "dev"))
		if err != nil {
			return "", fmt.Errorf("disk of partition %s: %w", mm, err)
		}
		mm = strings.TrimSpace(string(b))
	}
	return mm, nil
}

// run throttles the pods of batch (namespace ns; its pods may run elsewhere) until ctx ends or
// lift is called.
func (b *blkioThrottle) run(ctx context.Context, ns, batch string) {
	b.runPods(ctx, client.MatchingLabels{render.LabelBatch: batch, render.LabelBatchNamespace: ns}, func(p *corev1.Pod) bool {
		return p.Labels[render.LabelComponent] != render.ComponentScrub
	})
}

// runPods throttles the first pod the selector and match find (not being deleted) until ctx
// ends or lift is called.
func (b *blkioThrottle) runPods(ctx context.Context, sel client.MatchingLabels, match func(*corev1.Pod) bool) {
	var uid string
	for ctx.Err() == nil && !b.isLifted() {
		if uid == "" {
			var pods corev1.PodList
			if k8s.List(ctx, &pods, sel) == nil {
				for i := range pods.Items {
					if p := &pods.Items[i]; match(p) && p.DeletionTimestamp == nil {
						uid = string(p.UID)
					}
				}
			}
			if uid == "" {
				time.Sleep(100 * time.Millisecond)
				continue
			}
		}
		dirs, _ := filepath.Glob(filepath.Join(blkioRoot, "kubepods", "pod"+uid))
		more, _ := filepath.Glob(filepath.Join(blkioRoot, "kubepods", "*", "pod"+uid))
		for _, d := range append(dirs, more...) {
			subs, _ := filepath.Glob(filepath.Join(d, "*", "blkio.throttle.write_bps_device"))
			b.apply(d)
			for _, s := range subs {
				b.apply(filepath.Dir(s))
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (b *blkioThrottle) isLifted() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lifted
}

func (b *blkioThrottle) apply(dir string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lifted || b.touched[dir] {
		return
	}
	if b.write(dir, b.bps) == nil {
		b.touched[dir] = true
	}
}

func (b *blkioThrottle) write(dir string, bps int64) error {
	for _, f := range []string{"blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(fmt.Sprintf("%s %d", b.dev, bps)), 0); err != nil {
			return err
		}
	}
	return nil
}

// lift removes the limits (0 deletes a blk-throttle rule) and stops throttling new cgroups.
// It returns how many cgroups had been throttled.
func (b *blkioThrottle) lift() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lifted = true
	for d := range b.touched {
		_ = b.write(d, 0) // a cgroup already gone needs nothing
	}
	return len(b.touched)
}
