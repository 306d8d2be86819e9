package store

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/tfstate"
)

// Per-resource storage (issue 16 §1, ADR 0068; migrations 17 and 19).
//
// A version is stored either whole (versions.snapshot, as every version
// before migration 17) or as its header (versions.header: the document
// without its resources) and a manifest of resource entries
// (version_entries), each entry stored once per state by content hash
// (state_entries) and shared by every version that has it. Readers choose
// per version, so a store half converted by the backfill reads right.

// StoredDoc is how a versions row holds its document: Snapshot, the whole
// document compressed (CompressSnapshot), or Header, the header compressed
// with the document in the manifest — never both. Size is the whole
// document's length in bytes (engine.Version.Size).
type StoredDoc struct {
	Size     int64
	Snapshot []byte
	Header   []byte
}

// Entry is one resource entry as state_entries holds it: Hash, its name
// (Executor.EntryHash of its JSON); Size, the JSON's length in bytes; Body,
// the JSON compressed (the adapter seals it, ADR 0066).
type Entry struct {
	Hash []byte
	Size int64
	Body []byte
}

// ManifestEntry is one entry of a version's manifest: its entry address
// (tfstate.Resource.EntryAddress: module instance keys kept), its resource
// (tfstate.Resource.Address: the same without module instance keys), the
// entry's hash and length, and its body (compressed) when the read asked
// for bodies.
type ManifestEntry struct {
	Address  string
	Resource string
	Hash     []byte
	Size     int64
	Body     []byte
}

// ManifestQuery selects entries of a manifest: those at Entries (entry
// addresses) when Entries is not nil, else those of Resources (every
// module instance's entry of each resource) when Resources is not nil,
// else all; with their bodies when Bodies.
type ManifestQuery struct {
	Entries   []string
	Resources []string
	Bodies    bool
}

// all reports whether q selects every entry.
func (q ManifestQuery) all() bool { return q.Entries == nil && q.Resources == nil }

var gzipWriters = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return w
}}

// compressEntry gzips one entry (BestSpeed, a pooled writer: a first
// manifest writes thousands).
func compressEntry(raw []byte) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(raw)/3 + 32)
	zw := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(zw)
	zw.Reset(&buf)
	if _, err := zw.Write(raw); err != nil {
		return nil, fmt.Errorf("compressing entry: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compressing entry: %w", err)
	}
	return buf.Bytes(), nil
}

var gzipReaders sync.Pool // of *gzip.Reader

// decompressEntry reverses compressEntry with a pooled reader (a whole
// document reads thousands of entries; a gzip.Reader holds a 32 KiB
// window). size, the stored length, sizes the buffer and is checked.
func decompressEntry(z []byte, size int64) ([]byte, error) {
	var zr *gzip.Reader
	if r, ok := gzipReaders.Get().(*gzip.Reader); ok {
		if err := r.Reset(bytes.NewReader(z)); err != nil {
			return nil, fmt.Errorf("decompressing entry: %w", err)
		}
		zr = r
	} else {
		r, err := gzip.NewReader(bytes.NewReader(z))
		if err != nil {
			return nil, fmt.Errorf("decompressing entry: %w", err)
		}
		zr = r
	}
	defer gzipReaders.Put(zr)
	out := make([]byte, size)
	if _, err := io.ReadFull(zr, out); err != nil {
		return nil, fmt.Errorf("decompressing entry: %w", err)
	}
	if n, err := zr.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		return nil, fmt.Errorf("decompressing entry: not the stored %d bytes (%v)", size, err)
	}
	return out, nil
}

// maxHeaderBytes caps a header's decompressed length (a header is a
// document without resources: outputs and a few scalars).
const maxHeaderBytes = 1 << 30

// decompressHeader gunzips a stored header, whose length is not stored.
func decompressHeader(z []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		return nil, fmt.Errorf("decompressing header: %w", err)
	}
	defer zr.Close()
	b, err := io.ReadAll(io.LimitReader(zr, maxHeaderBytes+1))
	if err != nil {
		return nil, fmt.Errorf("decompressing header: %w", err)
	}
	if len(b) > maxHeaderBytes {
		return nil, fmt.Errorf("decompressing header: over %d bytes", maxHeaderBytes)
	}
	return b, nil
}

// split is a document as per-resource storage writes it: its header
// (compressed) and its entries by address. ok is false for a document that
// must be stored whole: one whose bytes Marshal would not write back, or
// whose resources are not in Terraform's order, which Snapshot assembles
// entries in (Snapshot returns what was committed, byte for byte).
type split struct {
	header  []byte
	entries map[string]splitEntry // by entry address
	ok      bool
}

// splitEntry is one entry of a split document: its compact JSON and its
// resource-level address.
type splitEntry struct {
	raw      []byte
	resource string
}

// entriesOf is s's entries by entry address.
func entriesOf(s *tfstate.State) map[string]splitEntry {
	out := make(map[string]splitEntry, len(s.Resources))
	for i := range s.Resources {
		r := &s.Resources[i]
		out[r.EntryAddress()] = splitEntry{raw: r.Raw, resource: r.Address()}
	}
	return out
}

// splitDoc splits doc (a Terraform state v4 document) for per-resource
// storage. A document tfstate.Parse refuses is stored whole, as every
// version was before (CheckSnapshot is the store's check of what it is
// given; the engine commits only documents it parsed).
func splitDoc(doc []byte) (split, error) {
	s, err := tfstate.Parse(doc)
	if err != nil {
		return split{}, nil
	}
	canon, err := s.Marshal()
	if err != nil {
		return split{}, err
	}
	if !s.InTerraformOrder() || !bytes.Equal(canon, doc) {
		return split{}, nil
	}
	h, err := s.Header().Marshal()
	if err != nil {
		return split{}, err
	}
	hz, err := CompressSnapshot(h)
	if err != nil {
		return split{}, err
	}
	return split{header: hz, entries: entriesOf(s), ok: true}, nil
}

// putVersion stores version v of a state whose document is doc, and its
// changed addresses: as a manifest of entries where doc splits (splitDoc),
// whole otherwise. prev is the manifest of the version v follows, as
// entry address → hash (manifestOf), nil when there is none (a state's
// first version, or a head stored whole): against prev only the entries
// that changed are written and only their intervals closed and opened (the
// manifest delta); without it every entry is opened at v.Serial, after
// closing whatever intervals a whole version left open. v.Size is set to
// len(doc). The caller holds the state's lock.
func putVersion(ctx context.Context, tx Executor, v engine.Version, doc []byte, prev map[string][]byte) error {
	v.Size = int64(len(doc))
	sp, err := splitDoc(doc)
	if err != nil {
		return err
	}
	if !sp.ok {
		z, err := CompressSnapshot(doc)
		if err != nil {
			return err
		}
		if err := tx.CloseEntries(ctx, v.State, v.Serial, nil); err != nil {
			return err
		}
		return tx.InsertVersion(ctx, v, StoredDoc{Size: v.Size, Snapshot: z})
	}
	if err := writeEntries(ctx, tx, v, sp.entries, prev); err != nil {
		return err
	}
	return tx.InsertVersion(ctx, v, StoredDoc{Size: v.Size, Header: sp.header})
}

// manifestOf is the manifest hr read, as entry address → hash; nil when
// hr is nil (the version is stored whole).
func manifestOf(hr *readEntries) map[string][]byte {
	if hr == nil {
		return nil
	}
	out := make(map[string][]byte, len(hr.rows))
	for _, r := range hr.rows {
		out[r.Address] = r.Hash
	}
	return out
}

// writeEntries writes the manifest of version v holding entries: the
// delta against prev (the previous version's manifest; nil when it has
// none, and then every open interval is closed first and every entry
// opened).
func writeEntries(ctx context.Context, tx Executor, v engine.Version, entries map[string]splitEntry, prev map[string][]byte) error {
	state, serial := v.State, v.Serial
	var closed []string
	if prev == nil {
		if err := tx.CloseEntries(ctx, state, serial, nil); err != nil {
			return err
		}
	}
	var stored []Entry
	var opened []ManifestEntry
	for _, a := range sortedAddrs(entries) {
		en := entries[a]
		hash := tx.EntryHash(en.raw)
		if old, ok := prev[a]; ok {
			if bytes.Equal(old, hash) {
				continue
			}
			closed = append(closed, a)
		}
		body, err := compressEntry(en.raw)
		if err != nil {
			return err
		}
		stored = append(stored, Entry{Hash: hash, Size: int64(len(en.raw)), Body: body})
		opened = append(opened, ManifestEntry{Address: a, Resource: en.resource, Hash: hash, Size: int64(len(en.raw))})
	}
	for a := range prev {
		if _, ok := entries[a]; !ok {
			closed = append(closed, a)
		}
	}
	if len(closed) > 0 {
		slices.Sort(closed)
		if err := tx.CloseEntries(ctx, state, serial, closed); err != nil {
			return err
		}
	}
	if err := tx.InsertEntries(ctx, state, stored, v.CreatedAt); err != nil {
		return err
	}
	return tx.OpenEntries(ctx, state, serial, opened)
}

func sortedAddrs[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for a := range m {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

// readDoc is the document of version serial of state: its snapshot, or
// its header and manifest put back together (tfstate.Assemble, Marshal),
// holding only the entries q selects (a slice) unless q selects all. A
// whole document's length is checked against the stored size.
// ErrNotFound for an unknown version.
func readDoc(ctx context.Context, ex Executor, state string, serial int64, q ManifestQuery) ([]byte, error) {
	doc, _, err := readVersion(ctx, ex, state, serial, q)
	return doc, err
}

// readVersion is readDoc with the version's StoredDoc and, for a version
// stored as a manifest, the entries read (bodies decompressed into raws).
type readEntries struct {
	stored  StoredDoc
	header  *tfstate.State
	hsize   int64 // the header's length as stored (uncompressed)
	rows    []ManifestEntry
	entries []tfstate.Resource // rows' entries, parsed, in rows' order
}

func readVersion(ctx context.Context, ex Executor, state string, serial int64, q ManifestQuery) ([]byte, *readEntries, error) {
	d, err := ex.VersionDoc(ctx, state, serial)
	if err != nil {
		return nil, nil, err
	}
	if d.Header == nil {
		doc, err := DecompressSnapshot(d.Snapshot, d.Size)
		if err != nil || q.all() {
			return doc, nil, err
		}
		doc, err = sliceOf(doc, q)
		return doc, nil, err
	}
	h, err := decompressHeader(d.Header)
	if err != nil {
		return nil, nil, err
	}
	header, err := tfstate.Parse(h)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the header of version %d: %w", serial, err)
	}
	q.Bodies = true
	rows, err := ex.Manifest(ctx, state, serial, q)
	if err != nil {
		return nil, nil, err
	}
	raws := make([][]byte, len(rows))
	for i, r := range rows {
		if raws[i], err = decompressEntry(r.Body, r.Size); err != nil {
			return nil, nil, fmt.Errorf("reading entry %s of version %d: %w", r.Address, serial, err)
		}
	}
	entries, err := tfstate.ParseEntries(raws)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the entries of version %d: %w", serial, err)
	}
	doc, err := tfstate.Assemble(header, entries).Marshal()
	if err != nil {
		return nil, nil, err
	}
	if q.all() && int64(len(doc)) != d.Size {
		return nil, nil, fmt.Errorf("reading version %d: its entries make %d bytes, its stored size says %d", serial, len(doc), d.Size)
	}
	return doc, &readEntries{stored: d, header: header, hsize: int64(len(h)), rows: rows, entries: entries}, nil
}

// sliceOf is doc with only the entries q selects.
func sliceOf(doc []byte, q ManifestQuery) ([]byte, error) {
	s, err := tfstate.Parse(doc)
	if err != nil {
		return nil, err
	}
	entries, resources := setOf(q.Entries), setOf(q.Resources)
	var keep []tfstate.Resource
	for _, r := range s.Resources {
		if q.Entries != nil && entries[r.EntryAddress()] || q.Entries == nil && resources[r.Address()] {
			keep = append(keep, r)
		}
	}
	return tfstate.Assemble(s.Header(), keep).Marshal()
}

func setOf(ss []string) map[string]bool {
	out := make(map[string]bool, len(ss))
	for _, s := range ss {
		out[s] = true
	}
	return out
}

// headForMerge is the head document a commit's merge gets, with the
// entries read (nil for a head stored whole) and whether it is a slice:
// when req names its MergeReads and the head is a manifest, the slice of
// those resources (for putSlice); otherwise the whole document, whose
// manifest (when it has one) the whole path's delta is computed against.
func headForMerge(ctx context.Context, tx Executor, st engine.State, req engine.CommitRequest) ([]byte, *readEntries, bool, error) {
	if req.MergeReads != nil {
		manifest, err := tx.HasManifest(ctx, st.Name, st.HeadSerial)
		if err != nil {
			return nil, nil, false, err
		}
		if manifest {
			reads := make([]string, len(req.MergeReads))
			for i, a := range req.MergeReads {
				reads[i] = string(a)
			}
			doc, hr, err := readVersion(ctx, tx, st.Name, st.HeadSerial, ManifestQuery{Resources: reads})
			return doc, hr, true, err
		}
	}
	doc, hr, err := readVersion(ctx, tx, st.Name, st.HeadSerial, ManifestQuery{})
	return doc, hr, false, err
}

// putSlice stores version v from the merged slice doc of a commit whose
// merge read only the head's entries of reads (hr): the slice's entries
// replace the head's entries of those resources (the manifest delta), every
// other entry of the head stays, the header is the slice's. v.Resources and
// v.Size are computed from the head's (head) and the two slices':
// tfstate.DocSize, so that the version reads back at its stored size. An
// entry of a resource outside reads is ErrInvalid: the merge wrote what it
// did not read.
func putSlice(ctx context.Context, tx Executor, v *engine.Version, doc []byte, head engine.Version, reads []engine.Address, hr *readEntries) error {
	ms, err := tfstate.Parse(doc)
	if err != nil {
		return fmt.Errorf("the merged slice: %w", err)
	}
	read := make(map[string]bool, len(reads))
	for _, a := range reads {
		read[string(a)] = true
	}
	entries := entriesOf(ms)
	var newSize int64
	for a, en := range entries {
		if !read[en.resource] {
			return engine.Errorf(engine.ErrInvalid, "the merge of version %d wrote entry %s, of a resource it did not read", v.Serial, a)
		}
		newSize += tfstate.EntryDocSize(en.raw)
	}
	prev := make(map[string][]byte, len(hr.rows))
	var oldSize int64
	for i, r := range hr.rows {
		prev[r.Address] = r.Hash
		oldSize += tfstate.EntryDocSize(hr.entries[i].Raw)
	}
	h, err := ms.Header().Marshal()
	if err != nil {
		return err
	}
	hz, err := CompressSnapshot(h)
	if err != nil {
		return err
	}
	// The head's entries take K = Size − header bytes (tfstate.DocSize:
	// Σ entry sizes + 6 per entry + 2, or 0 for none).
	k := head.Size - hr.hsize
	if k < 0 || k == 1 || k == 2 {
		return fmt.Errorf("version %d: stored size %d and header size %d do not agree", head.Serial, head.Size, hr.hsize)
	}
	if k == 0 {
		k = 2
	}
	k += newSize + 6*int64(len(entries)) - oldSize - 6*int64(len(hr.rows))
	if k == 2 {
		k = 0
	}
	v.Size = int64(len(h)) + k
	oldCount := tfstate.Assemble(hr.header, hr.entries).ResourceCount()
	v.Resources = head.Resources - oldCount + ms.ResourceCount()
	if err := writeEntries(ctx, tx, *v, entries, prev); err != nil {
		return err
	}
	return tx.InsertVersion(ctx, *v, StoredDoc{Size: v.Size, Header: hz})
}
