// opencl-device-plugin stands in for the NVIDIA device plugin on the local cluster's real node:
// it advertises a host OpenCL device (pocl's CPU device in CI) as the extended resource
// nvidia.com/gpu through the kubelet's device plugin API, and on Allocate hands the container
// NVIDIA_VISIBLE_DEVICES, as NVIDIA's plugin does. The container runtime (runc-opencl, beside
// this command) then mounts the host's OpenCL stack into exactly those containers, so a
// pc2Engine gpu sealer pod gets its device through the same resource path as on a GPU node.
//
//	opencl-device-plugin --kubelet-dir DIR [--devices N] [--resource nvidia.com/gpu]
//
// It registers again whenever the kubelet's registration socket is re-created (a kubelet
// restart forgets plugins).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

const socketName = "sealfleet-opencl.sock"

type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	devices []*pluginapi.Device
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

// ListAndWatch sends the device list once; the devices never change while it runs.
func (p *plugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: p.devices}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

// Allocate names the granted devices in NVIDIA_VISIBLE_DEVICES, the variable the runtime reads,
// and points the sealer at OpenCL device 0 (SEALER_GPU_DEVICE): the host's OpenCL device is a
// CPU one, which the sealer would not pick by itself (it looks for a GPU).
func (p *plugin) Allocate(_ context.Context, r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, c := range r.ContainerRequests {
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{"NVIDIA_VISIBLE_DEVICES": strings.Join(c.DevicesIds, ","), "SEALER_GPU_DEVICE": "0"},
		})
		log.Printf("allocated %v", c.DevicesIds)
	}
	return resp, nil
}

func (p *plugin) GetPreferredAllocation(context.Context, *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	return &pluginapi.PreferredAllocationResponse{}, nil
}

func (p *plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

func register(kubeletSock, resource string) error {
	conn, err := grpc.NewClient("unix://"+kubeletSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: socketName, ResourceName: resource,
		Options: &pluginapi.DevicePluginOptions{},
	})
	return err
}

// inode identifies the kubelet's registration socket, so a re-created one is noticed.
func inode(path string) (uint64, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, false
	}
	return fi.Sys().(*syscall.Stat_t).Ino, true
}

func main() {
	dir := flag.String("kubelet-dir", "/var/lib/kubelet", "the folder holding device-plugins/ (the kubelet serves /var/lib/kubelet/device-plugins whatever its --root-dir)")
	n := flag.Int("devices", 1, "how many devices to advertise")
	resource := flag.String("resource", "nvidia.com/gpu", "the extended resource name")
	flag.Parse()
	if *n < 1 {
		log.Fatalf("--devices %d: advertise at least one device", *n)
	}
	p := &plugin{}
	for i := range *n {
		p.devices = append(p.devices, &pluginapi.Device{ID: fmt.Sprintf("opencl-%d", i), Health: pluginapi.Healthy})
	}
	plugDir := filepath.Join(*dir, "device-plugins")
	sock := filepath.Join(plugDir, socketName)
	kubeletSock := filepath.Join(plugDir, "kubelet.sock")
	var (
		srv        *grpc.Server
		registered uint64
	)
	for {
		// A restarting kubelet removes every plugin socket: serve a fresh one and register again.
		if _, err := os.Stat(sock); err != nil {
			if srv != nil {
				srv.Stop()
			}
			// The kubelet makes device-plugins/ when its device manager starts.
			if srv, err = serve(p, sock); err != nil {
				log.Printf("serving %s: %v (retrying)", sock, err)
				time.Sleep(time.Second)
				continue
			}
			registered = 0
		}
		if ino, ok := inode(kubeletSock); ok && ino != registered {
			if err := register(kubeletSock, *resource); err != nil {
				log.Printf("register with %s: %v (retrying)", kubeletSock, err)
			} else {
				registered = ino
				log.Printf("registered %s: %d device(s)", *resource, *n)
			}
		}
		time.Sleep(2 * time.Second)
	}
}

// serve listens on sock and serves the plugin API there.
func serve(p *plugin, sock string) (*grpc.Server, error) {
	_ = os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		return nil, err
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	go func() { _ = srv.Serve(l) }()
	return srv, nil
}
