package metrics

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

type cgroupVersion int

const (
	cgroupNone cgroupVersion = iota
	cgroupV1
	cgroupV2
)

func (v cgroupVersion) String() string {
	switch v {
	case cgroupV1:
		return "v1"
	case cgroupV2:
		return "v2"
	default:
		return "none"
	}
}

// controller locates one cgroup controller: mount is the top of its
// hierarchy (limits are looked up no higher than this) and dir is the
// process's own cgroup in it. An empty dir means the controller is absent.
type controller struct {
	mount, dir string
}

func (c controller) ok() bool { return c.dir != "" }

func (c controller) file(name string) string { return filepath.Join(c.dir, name) }

// ancestors lists dir and each parent up to and including mount.
func (c controller) ancestors() []string {
	var dirs []string
	for d := c.dir; ; d = filepath.Dir(d) {
		dirs = append(dirs, d)
		if d == c.mount || !strings.HasPrefix(d, c.mount) || filepath.Dir(d) == d {
			return dirs
		}
	}
}

// layout is where the process's cgroup files are. With v2 every
// controller points at the same directory.
type layout struct {
	version                      cgroupVersion
	cpu, cpuacct, cpuset, memory controller
}

// detect finds the cgroup version under root and the process's own cgroup
// from procRoot/self/cgroup. A membership path that does not exist under the
// root (a container without a cgroup namespace sees the host's path) falls
// back to the root, which is then the container's own cgroup.
func detect(root, procRoot string) (layout, error) {
	root = filepath.Clean(root)
	v2path, v1paths, v1lists, err := readMembership(filepath.Join(procRoot, "self", "cgroup"))
	if err != nil {
		return layout{}, err
	}
	if exists(filepath.Join(root, "cgroup.controllers")) {
		c := controller{mount: root, dir: joinOrRoot(root, v2path)}
		return layout{version: cgroupV2, cpu: c, cpuacct: c, cpuset: c, memory: c}, nil
	}
	find := func(name string) controller {
		for _, m := range []string{name, v1lists[name]} {
			if m == "" {
				continue
			}
			mount := filepath.Join(root, m)
			if st, err := os.Stat(mount); err == nil && st.IsDir() {
				return controller{mount: mount, dir: joinOrRoot(mount, v1paths[name])}
			}
		}
		return controller{}
	}
	l := layout{cpu: find("cpu"), cpuacct: find("cpuacct"), cpuset: find("cpuset"), memory: find("memory")}
	if l.cpu.ok() || l.cpuacct.ok() || l.cpuset.ok() || l.memory.ok() {
		l.version = cgroupV1
	}
	return l, nil
}

// readMembership parses /proc/self/cgroup ("id:controllers:path" lines). A
// missing file yields no paths, so every controller resolves to its root.
func readMembership(path string) (v2path string, v1paths, v1lists map[string]string, err error) {
	v1paths, v1lists = map[string]string{}, map[string]string{}
	data, ok, err := readFile(path)
	if err != nil || !ok {
		return "", v1paths, v1lists, err
	}
	sc := bufio.NewScanner(strings.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			return "", nil, nil, fmt.Errorf("metrics: parse %s: malformed line %q", path, line)
		}
		if parts[0] == "0" && parts[1] == "" {
			v2path = parts[2]
			continue
		}
		for _, name := range strings.Split(parts[1], ",") {
			v1paths[name] = parts[2]
			v1lists[name] = parts[1]
		}
	}
	return v2path, v1paths, v1lists, nil
}

func joinOrRoot(root, rel string) string {
	if rel == "" || rel == "/" {
		return root
	}
	joined := filepath.Join(root, filepath.Clean("/"+rel))
	if exists(joined) {
		return joined
	}
	return root
}

// cpuUsage is the cumulative CPU time of the cgroup in nanoseconds; ok is
// false when the cgroup has no CPU accounting.
func (l layout) cpuUsage() (ns uint64, ok bool, err error) {
	switch l.version {
	case cgroupV2:
		p := l.cpu.file("cpu.stat")
		data, ok, err := readFile(p)
		if err != nil || !ok {
			return 0, false, err
		}
		usec, ok, err := statValue(data, "usage_usec", p)
		return usec * 1000, ok, err
	case cgroupV1:
		if !l.cpuacct.ok() {
			return 0, false, nil
		}
		return readUint(l.cpuacct.file("cpuacct.usage"))
	}
	return 0, false, nil
}

// cpuQuota is the tightest CFS bandwidth limit, in cores, on the cgroup or
// its ancestors; ok is false when none is set.
func (l layout) cpuQuota() (cores float64, ok bool, err error) {
	if l.version == cgroupNone || !l.cpu.ok() {
		return 0, false, nil
	}
	for _, dir := range l.cpu.ancestors() {
		var q float64
		var found bool
		if l.version == cgroupV2 {
			q, found, err = cpuMaxV2(filepath.Join(dir, "cpu.max"))
		} else {
			q, found, err = cpuQuotaV1(dir)
		}
		if err != nil {
			return 0, false, err
		}
		if found && (!ok || q < cores) {
			cores, ok = q, true
		}
	}
	return cores, ok, nil
}

// cpuMaxV2 parses cpu.max: "$QUOTA $PERIOD" or "max $PERIOD".
func cpuMaxV2(path string) (float64, bool, error) {
	data, ok, err := readFile(path)
	if err != nil || !ok {
		return 0, false, err
	}
	f := strings.Fields(data)
	if len(f) == 0 || len(f) > 2 {
		return 0, false, fmt.Errorf("metrics: parse %s: unexpected content %q", path, strings.TrimSpace(data))
	}
	if f[0] == "max" {
		return 0, false, nil
	}
	quota, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("metrics: parse %s: %w", path, err)
	}
	period := uint64(100000)
	if len(f) == 2 {
		if period, err = strconv.ParseUint(f[1], 10, 64); err != nil {
			return 0, false, fmt.Errorf("metrics: parse %s: %w", path, err)
		}
	}
	if quota == 0 || period == 0 {
		return 0, false, nil
	}
	return float64(quota) / float64(period), true, nil
}

// cpuQuotaV1 reads cpu.cfs_quota_us (-1 means unlimited) and cpu.cfs_period_us.
func cpuQuotaV1(dir string) (float64, bool, error) {
	qp := filepath.Join(dir, "cpu.cfs_quota_us")
	data, ok, err := readFile(qp)
	if err != nil || !ok {
		return 0, false, err
	}
	quota, err := strconv.ParseInt(strings.TrimSpace(data), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("metrics: parse %s: %w", qp, err)
	}
	if quota <= 0 {
		return 0, false, nil
	}
	period, ok, err := readUint(filepath.Join(dir, "cpu.cfs_period_us"))
	if err != nil || !ok || period == 0 {
		return 0, false, err
	}
	return float64(quota) / float64(period), true, nil
}

// cpusetSize is the number of CPUs the cgroup may run on, 0 if unknown.
func (l layout) cpusetSize() (int, error) {
	var names []string
	switch {
	case l.version == cgroupV2:
		names = []string{"cpuset.cpus.effective"}
	case l.version == cgroupV1 && l.cpuset.ok():
		names = []string{"cpuset.effective_cpus", "cpuset.cpus"}
	}
	for _, name := range names {
		p := l.cpuset.file(name)
		data, ok, err := readFile(p)
		if err != nil {
			return 0, err
		}
		if !ok {
			continue
		}
		n, err := cpuListSize(data)
		if err != nil {
			return 0, fmt.Errorf("metrics: parse %s: %w", p, err)
		}
		if n > 0 {
			return n, nil
		}
	}
	return 0, nil
}

// cpuListSize counts the CPUs in a kernel list such as "0-3,8,10-11".
func cpuListSize(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	n := 0
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0, fmt.Errorf("bad cpu list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return 0, fmt.Errorf("bad cpu list %q: %w", s, err)
			}
		}
		if a < 0 || b < a {
			return 0, fmt.Errorf("bad cpu list %q: range %q", s, part)
		}
		n += b - a + 1
	}
	return n, nil
}

// memoryLimit is the tightest memory limit in bytes on the cgroup or its
// ancestors; ok is false when none is set. The caller caps it to the host.
func (l layout) memoryLimit() (limit uint64, ok bool, err error) {
	if l.version == cgroupNone || !l.memory.ok() {
		return 0, false, nil
	}
	consider := func(v uint64) {
		if v > 0 && (!ok || v < limit) {
			limit, ok = v, true
		}
	}
	name := "memory.limit_in_bytes"
	if l.version == cgroupV2 {
		name = "memory.max"
	}
	for _, dir := range l.memory.ancestors() {
		p := filepath.Join(dir, name)
		data, found, err := readFile(p)
		if err != nil {
			return 0, false, err
		}
		if !found || strings.TrimSpace(data) == "max" {
			continue
		}
		v, err := strconv.ParseUint(strings.TrimSpace(data), 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("metrics: parse %s: %w", p, err)
		}
		consider(v)
	}
	if l.version == cgroupV1 {
		// v1 also reports the limit inherited from ancestors outside our view.
		p := l.memory.file("memory.stat")
		data, found, err := readFile(p)
		if err != nil {
			return 0, false, err
		}
		if found {
			v, found, err := statValue(data, "hierarchical_memory_limit", p)
			if err != nil {
				return 0, false, err
			}
			if found {
				consider(v)
			}
		}
	}
	return limit, ok, nil
}

// memoryUsage is the cgroup's usage minus its inactive file cache, the
// figure `docker stats` shows; ok is false without memory accounting.
func (l layout) memoryUsage() (used uint64, ok bool, err error) {
	if l.version == cgroupNone || !l.memory.ok() {
		return 0, false, nil
	}
	usageFile, inactiveKeys := "memory.usage_in_bytes", []string{"total_inactive_file", "inactive_file"}
	if l.version == cgroupV2 {
		usageFile, inactiveKeys = "memory.current", []string{"inactive_file"}
	}
	usage, ok, err := readUint(l.memory.file(usageFile))
	if err != nil || !ok {
		return 0, false, err
	}
	p := l.memory.file("memory.stat")
	data, found, err := readFile(p)
	if err != nil {
		return 0, false, err
	}
	if found {
		for _, key := range inactiveKeys {
			v, found, err := statValue(data, key, p)
			if err != nil {
				return 0, false, err
			}
			if found {
				return usage - min(v, usage), true, nil
			}
		}
	}
	return usage, true, nil
}

// readFile returns the content of path; ok is false when it does not exist.
func readFile(path string) (data string, ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("metrics: read %s: %w", path, err)
	}
	return string(b), true, nil
}

// readUint reads a file holding one unsigned integer.
func readUint(path string) (uint64, bool, error) {
	data, ok, err := readFile(path)
	if err != nil || !ok {
		return 0, false, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(data), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("metrics: parse %s: %w", path, err)
	}
	return v, true, nil
}

// statValue finds "key value" in a flat-keyed file such as cpu.stat or
// memory.stat; path only names the file in errors.
func statValue(data, key, path string) (uint64, bool, error) {
	sc := bufio.NewScanner(strings.NewReader(data))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		if k != key {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("metrics: parse %s: %s: %w", path, key, err)
		}
		return n, true, nil
	}
	return 0, false, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
