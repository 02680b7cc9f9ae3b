package tier

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// scan rebuilds the index and the usage record from the directory: every
// record of every namespace, weighted by its namespace directory's block
// size. Temporary files are leftovers of writers that died (live writers hold
// the lock) and are removed. Caller holds mu and the lock.
func (d *Disk) scan() error {
	d.idx.reset()
	d.spaces = d.spaces[:1]
	clear(d.spaceIDs)
	d.spaceIDs[filepath.Base(d.own.dir)] = 0
	ents, err := os.ReadDir(d.dir)
	if err != nil {
		return fmt.Errorf("%w: scan %s: %w", ErrDiskWrite, d.dir, err)
	}
	var u diskUsage
	for _, e := range ents {
		w, ok := parseSpaceDirName(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		id := d.spaceID(e.Name(), w)
		spaceDir := d.spaces[id].dir
		subs, err := os.ReadDir(spaceDir)
		if err != nil {
			continue
		}
		for _, s := range subs {
			if len(s.Name()) != 2 || !isHex(s.Name()) || !s.IsDir() {
				continue
			}
			n, b := d.scanSub(id, filepath.Join(spaceDir, s.Name()), s.Name(), w)
			u.blocks += n
			u.bytes += b
		}
	}
	d.usage = u
	d.lastScan = d.clk.Now().UnixNano()
	d.complete = true
	return d.saveUsage()
}

// scanSub indexes one subdirectory's records and returns their count and bytes.
func (d *Disk) scanSub(id uint32, dir, sub string, w int64) (blocks, bytes int64) {
	files, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0
	}
	for _, f := range files {
		name := f.Name()
		if strings.HasPrefix(name, tempPrefix) {
			_ = os.Remove(filepath.Join(dir, name))
			continue
		}
		h, ok := parseRecordName(sub, name)
		if !ok || !f.Type().IsRegular() {
			continue
		}
		info, err := f.Info()
		if err != nil {
			continue
		}
		d.idx.set(idxKey{space: id, h: h}, info.ModTime().UnixNano())
		blocks++
		bytes += w
	}
	return blocks, bytes
}

// spaceID returns the index of the namespace directory name, adding it.
func (d *Disk) spaceID(name string, w int64) uint32 {
	if id, ok := d.spaceIDs[name]; ok {
		return id
	}
	d.spaces = append(d.spaces, diskSpace{dir: filepath.Join(d.dir, name), weight: w})
	id := uint32(len(d.spaces) - 1)
	d.spaceIDs[name] = id
	return id
}
