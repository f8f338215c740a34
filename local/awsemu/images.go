package awsemu

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// The public images the emulated account sees: the EKS-optimized AMIs of
// every family Millwright launches, several releases each, named, owned
// and dated like the real ones, with the public SSM parameters AWS
// publishes for them (the release's own and, for the newest release, the
// "recommended"/"latest" one).

// Image operating systems (image.os).
const (
	osAL2023       = "al2023"
	osAL2          = "al2"
	osBottlerocket = "bottlerocket"
	osWindows      = "windows"
)

// Publishers of the public images.
const (
	eksImageOwner          = "602401143452" // EKS-optimized Amazon Linux
	bottlerocketImageOwner = "092701018921"
	windowsImageOwner      = "801119661308"
)

// imageRelease is one release of an image family.
type imageRelease struct {
	version string
	created time.Time
}

func day(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 6, 0, 0, 0, time.UTC) }

// deprecation is when AWS deprecates a public image: two years after it
// was created, or, once a newer release is out, a month after that one (the
// EKS AMIs' cadence, so the emulator shows deprecated releases too).
func deprecation(releases []imageRelease, i int) time.Time {
	if i+1 < len(releases) {
		return releases[i+1].created.AddDate(0, 1, 0)
	}
	return releases[i].created.AddDate(2, 0, 0)
}

var (
	amazonLinuxReleases = []imageRelease{
		{"v20240625", day(2024, 6, 25)},
		{"v20261015", day(2026, 10, 15)},
		{"v20261101", day(2026, 11, 1)},
	}
	bottlerocketReleases = []imageRelease{
		{"v1.20.3", day(2024, 6, 20)},
		{"v1.49.0", day(2026, 10, 8)},
		{"v1.50.0", day(2026, 11, 5)},
	}
	windowsReleases = []imageRelease{
		{"2024.06.13", day(2024, 6, 13)},
		{"2026.10.14", day(2026, 10, 14)},
		{"2026.11.12", day(2026, 11, 12)},
	}
	// windowsBuilds are the node.kubernetes.io/windows-build of each
	// Windows Server version.
	windowsBuilds = map[string]string{"2019": "10.0.17763", "2022": "10.0.20348", "2025": "10.0.26100"}
)

// defaultImages builds the public images for Kubernetes version k8s.
func defaultImages(k8s string) []image {
	var out []image
	add := func(im image) {
		im.id = "ami-" + hashHex(17, im.name)
		if im.tags == nil {
			im.tags = map[string]string{}
		}
		out = append(out, im)
	}
	for i, r := range amazonLinuxReleases {
		latest := i == len(amazonLinuxReleases)-1
		for _, v := range []struct{ arch, variant string }{{"x86_64", "standard"}, {"arm64", "standard"}, {"x86_64", "nvidia"}, {"x86_64", "neuron"}} {
			name := fmt.Sprintf("amazon-eks-node-al2023-%s-%s-%s-%s", v.arch, v.variant, k8s, r.version)
			prefix := fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2023/%s/%s/", k8s, v.arch, v.variant)
			params := []string{prefix + name + "/image_id"}
			if latest {
				params = append(params, prefix+"recommended/image_id")
			}
			add(image{
				name: name, arch: v.arch, os: osAL2023, created: r.created, deprecated: deprecation(amazonLinuxReleases, i),
				description: fmt.Sprintf("EKS-optimized Kubernetes node based on Amazon Linux 2023, (k8s: %s, variant: %s)", k8s, v.variant),
				ownerID:     eksImageOwner, ownerAlias: "amazon", ssmParameters: params,
				tags: map[string]string{"os": "al2023", "kubernetes-version": k8s, "variant": v.variant, "release": r.version},
			})
		}
		// AL2: x86_64, arm64 and GPU images, named without the OS.
		for _, v := range []struct{ arch, infix, param string }{{"x86_64", "", "amazon-linux-2"}, {"arm64", "arm64-", "amazon-linux-2-arm64"}, {"x86_64", "gpu-", "amazon-linux-2-gpu"}} {
			name := fmt.Sprintf("amazon-eks-%snode-%s-%s", v.infix, k8s, r.version)
			prefix := fmt.Sprintf("/aws/service/eks/optimized-ami/%s/%s/", k8s, v.param)
			params := []string{prefix + fmt.Sprintf("amazon-eks-node-%s-%s", k8s, r.version) + "/image_id"}
			if latest {
				params = append(params, prefix+"recommended/image_id")
			}
			add(image{
				name: name, arch: v.arch, os: osAL2, created: r.created, deprecated: deprecation(amazonLinuxReleases, i),
				description: fmt.Sprintf("EKS Kubernetes Worker AMI with AmazonLinux2 image, (k8s: %s, docker: none, containerd: 1.7)", k8s),
				ownerID:     eksImageOwner, ownerAlias: "amazon", ssmParameters: params,
			})
		}
	}
	for i, r := range bottlerocketReleases {
		latest := i == len(bottlerocketReleases)-1
		for _, v := range []struct{ arch, variant string }{{"x86_64", ""}, {"arm64", ""}, {"x86_64", "-nvidia"}, {"arm64", "-nvidia"}} {
			commit := hashHex(8, "bottlerocket", r.version)
			name := fmt.Sprintf("bottlerocket-aws-k8s-%s%s-%s-%s-%s", k8s, v.variant, v.arch, r.version, commit)
			prefix := fmt.Sprintf("/aws/service/bottlerocket/aws-k8s-%s%s/%s/", k8s, v.variant, v.arch)
			params := []string{prefix + strings.TrimPrefix(r.version, "v") + "/image_id"}
			if latest {
				params = append(params, prefix+"latest/image_id")
			}
			add(image{
				name: name, arch: v.arch, os: osBottlerocket, created: r.created, deprecated: deprecation(bottlerocketReleases, i),
				description: fmt.Sprintf("bottlerocket-aws-k8s-%s%s-%s-%s", k8s, v.variant, v.arch, r.version),
				ownerID:     bottlerocketImageOwner, ownerAlias: "amazon", ssmParameters: params,
			})
		}
	}
	for i, r := range windowsReleases {
		latest := i == len(windowsReleases)-1
		for _, version := range []string{"2019", "2022", "2025"} {
			base := fmt.Sprintf("Windows_Server-%s-English-Core-EKS_Optimized-%s", version, k8s)
			var params []string
			if latest {
				params = []string{"/aws/service/ami-windows-latest/" + base + "/image_id"}
			}
			add(image{
				name: base + "-" + r.version, arch: "x86_64", os: osWindows, windowsBuild: windowsBuilds[version],
				created: r.created, deprecated: deprecation(windowsReleases, i),
				description: fmt.Sprintf("Microsoft Windows Server %s Core optimized for EKS and Kubernetes %s", version, k8s),
				ownerID:     windowsImageOwner, ownerAlias: "amazon", ssmParameters: params,
			})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// imageBySSMParameter is the image a public SSM parameter names.
func (w *world) imageBySSMParameter(name string) (image, bool) {
	for _, im := range w.imageList() {
		for _, p := range im.ssmParameters {
			if p == name {
				return im, true
			}
		}
	}
	return image{}, false
}

// ImageRelease asks the emulator to publish a new release of an image
// family, as AWS does when a new EKS-optimized AMI comes out: every image
// of the family's newest release is copied under the new version (new id,
// created now), the "latest"/"recommended" SSM parameters move to the
// copies, and the previous release is deprecated a month from now. An
// EC2NodeClass selecting family@latest then resolves to the new AMIs, and
// nodes launched with the old ones drift.
type ImageRelease struct {
	// Family is al2023, al2, bottlerocket or windows.
	Family string `json:"family"`
	// Version is the new release, e.g. v20261201 (Amazon Linux),
	// v1.51.0 (Bottlerocket), 2026.12.10 (Windows).
	Version string `json:"version"`
}

// ImageReleaseResult names the images a release published.
type ImageReleaseResult struct {
	ImageIDs []string `json:"imageIds"`
}

// PublishImageRelease publishes release (see ImageRelease).
func (e *Emulator) PublishImageRelease(release ImageRelease) (ImageReleaseResult, error) {
	return e.world.publishRelease(release, e.clock.Now())
}

func (w *world) publishRelease(release ImageRelease, now time.Time) (ImageReleaseResult, error) {
	w.imagesMu.Lock()
	defer w.imagesMu.Unlock()
	if release.Version == "" {
		return ImageReleaseResult{}, adminErrorf(400, "image release: version is required")
	}
	previous := w.latestRelease[release.Family]
	if previous == "" {
		return ImageReleaseResult{}, adminErrorf(400, "image release: family %q is not one of al2023, al2, bottlerocket, windows", release.Family)
	}
	if previous == release.Version {
		return ImageReleaseResult{}, adminErrorf(409, "image release: %s %s is already the newest release", release.Family, release.Version)
	}
	renames := []string{previous, release.Version, strings.TrimPrefix(previous, "v"), strings.TrimPrefix(release.Version, "v")}
	if release.Family == osBottlerocket {
		renames = append(renames, hashHex(8, "bottlerocket", previous), hashHex(8, "bottlerocket", release.Version))
	}
	rename := strings.NewReplacer(renames...)
	var published []image
	for i := range w.images {
		old := &w.images[i]
		if old.os != release.Family || !strings.Contains(old.name, previous) {
			continue
		}
		im := *old
		im.name, im.description = rename.Replace(old.name), rename.Replace(old.description)
		im.id = "ami-" + hashHex(17, im.name)
		im.created, im.deprecated = now, now.AddDate(2, 0, 0)
		im.tags = map[string]string{}
		for k, v := range old.tags {
			im.tags[k] = rename.Replace(v)
		}
		im.ssmParameters = nil
		var kept []string
		for _, p := range old.ssmParameters {
			if moved := rename.Replace(p); moved != p {
				im.ssmParameters = append(im.ssmParameters, moved) // the release's own parameter
				kept = append(kept, p)
			} else {
				im.ssmParameters = append(im.ssmParameters, p) // latest/recommended moves
			}
		}
		old.ssmParameters = kept
		if old.deprecated.After(now.AddDate(0, 1, 0)) {
			old.deprecated = now.AddDate(0, 1, 0)
		}
		published = append(published, im)
	}
	if len(published) == 0 {
		return ImageReleaseResult{}, adminErrorf(404, "image release: no %s image of release %s to follow", release.Family, previous)
	}
	w.images = append(w.images, published...)
	sort.Slice(w.images, func(i, j int) bool { return w.images[i].id < w.images[j].id })
	w.latestRelease[release.Family] = release.Version
	var out ImageReleaseResult
	for _, im := range published {
		out.ImageIDs = append(out.ImageIDs, im.id)
	}
	sort.Strings(out.ImageIDs)
	return out, nil
}

// imageList is a snapshot of the images (a release may be published
// meanwhile).
func (w *world) imageList() []image {
	w.imagesMu.RLock()
	defer w.imagesMu.RUnlock()
	return w.images
}
