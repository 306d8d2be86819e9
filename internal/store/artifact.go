package store

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/kilolock/kilolock/internal/seal"
)

// Artifacts are stored compressed when that pays (issue 16 §2, ADR 0068):
// a blob of at least compressMin bytes that gzip (BestSpeed) shrinks by at
// least an eighth is stored as artifactMarker, its length as a uvarint,
// and the gzip stream; any other blob as it is. No JSON document, tar or
// zip archive begins with a NUL byte, so the marker cannot be mistaken
// for a blob stored as it is. Sealing (ADR 0066) wraps the result. Binaries
// below store level 3 never read such a row: the read level is 3.
const (
	artifactMarker = "\x00KLZ1"
	compressMin    = 1024
)

// EncodeArtifact is data of run's artifact name as stored: compressed when
// that pays, then sealed by kr for ArtifactPlace (clear without a key).
func EncodeArtifact(kr *seal.Keyring, run, name string, data []byte) ([]byte, error) {
	// A blob that begins with the marker itself is always stored
	// compressed, so that it reads back as it was.
	wrap := bytes.HasPrefix(data, []byte(artifactMarker))
	if wrap || len(data) >= compressMin {
		var buf bytes.Buffer
		buf.WriteString(artifactMarker)
		buf.Write(binary.AppendUvarint(nil, uint64(len(data))))
		zw := gzipWriters.Get().(*gzip.Writer)
		zw.Reset(&buf)
		_, err := zw.Write(data)
		if err == nil {
			err = zw.Close()
		}
		gzipWriters.Put(zw)
		if err != nil {
			return nil, fmt.Errorf("compressing artifact %s of run %s: %w", name, run, err)
		}
		if wrap || buf.Len() <= len(data)-len(data)/8 {
			data = buf.Bytes()
		}
	}
	return kr.Seal(ArtifactPlace(run, name), data)
}

// DecodeArtifact reverses EncodeArtifact for stored, the artifacts row of
// run's artifact name: opened by kr, decompressed when compressed. A sealed
// row kr cannot open, or a compressed one whose length disagrees, is an
// error naming the artifact.
func DecodeArtifact(kr *seal.Keyring, run, name string, stored []byte) ([]byte, error) {
	b, err := kr.Open(ArtifactPlace(run, name), stored)
	if err != nil || !bytes.HasPrefix(b, []byte(artifactMarker)) {
		return b, err
	}
	rest := b[len(artifactMarker):]
	n, k := binary.Uvarint(rest)
	if k <= 0 || n > 1<<40 {
		return nil, fmt.Errorf("reading artifact %s of run %s: a compressed row without its length", name, run)
	}
	zr, err := gzip.NewReader(bytes.NewReader(rest[k:]))
	if err != nil {
		return nil, fmt.Errorf("reading artifact %s of run %s: %w", name, run, err)
	}
	out := make([]byte, n)
	if _, err := io.ReadFull(zr, out); err != nil {
		return nil, fmt.Errorf("reading artifact %s of run %s: %w", name, run, err)
	}
	if m, err := zr.Read(make([]byte, 1)); m != 0 || err != io.EOF {
		return nil, fmt.Errorf("reading artifact %s of run %s: not %d bytes as stored (%v)", name, run, n, err)
	}
	return out, nil
}
