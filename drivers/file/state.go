package file

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// The record at the start of a lock file (little endian):
//
//	0  magic "MXFL"
//	4  version (1)
//	5  mechanism: 0 OFD locks, 1 flock, 2 LockFileEx (see Mechanism)
//	6  token length (0: free)
//	8  fence: the last fence granted for the name, never reset
//	16 expiry: monotonic nanoseconds (hostClock) at which the holder's lock ends
//	24 liveness lock: 1+fence, the byte the holder keeps OFD-locked, or the
//	   suffix of the liveness file it keeps flocked, while it holds
//	32 holder's process id (information only)
//	36 CRC-32C of bytes 0-35 and the token
//	40 token
//
// A file is rewritten in place, never truncated: bytes after the record are
// left-overs of longer tokens and are ignored.
const (
	recMagic   = "MXFL"
	recVersion = 1
	recHeader  = 40
	recMax     = recHeader + MaxTokenLen
)

// The mechanism byte of a record.
const (
	markOFD      = 0
	markFlock    = 1
	markLockFile = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// record is the decoded content of a lock file.
type record struct {
	fence   uint64
	expiry  int64 // monotonic ns
	liveOff int64
	pid     uint32
	mark    byte   // the mechanism of the driver that wrote it
	token   []byte // nil when free; aliases the read buffer
}

// held reports whether the record names a holder.
func (r *record) held() bool { return len(r.token) > 0 }

// decode reads a record from the first n bytes of a file. An empty file is a
// free lock with fence 0.
func decode(buf []byte, r *record) error {
	*r = record{}
	if len(buf) == 0 {
		return nil
	}
	if len(buf) < recHeader || string(buf[0:4]) != recMagic || buf[4] != recVersion || buf[5] > markLockFile {
		return fmt.Errorf("%w: bad header", ErrCorrupt)
	}
	tlen := int(binary.LittleEndian.Uint16(buf[6:8]))
	if tlen > MaxTokenLen || recHeader+tlen > len(buf) {
		return fmt.Errorf("%w: bad token length", ErrCorrupt)
	}
	crc := crc32.Update(crc32.Checksum(buf[0:36], castagnoli), castagnoli, buf[recHeader:recHeader+tlen])
	if crc != binary.LittleEndian.Uint32(buf[36:40]) {
		return fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	r.fence = binary.LittleEndian.Uint64(buf[8:16])
	r.expiry = int64(binary.LittleEndian.Uint64(buf[16:24]))
	r.liveOff = int64(binary.LittleEndian.Uint64(buf[24:32]))
	r.pid = binary.LittleEndian.Uint32(buf[32:36])
	r.mark = buf[5]
	if tlen > 0 {
		r.token = buf[recHeader : recHeader+tlen]
	}
	return nil
}

// encode writes r with holder token (r.token is ignored; "" for a free
// lock) into buf (at least recHeader+len(token) bytes) and returns the bytes
// to write.
func encode(buf []byte, r *record, token string) []byte {
	buf = buf[:recHeader+len(token)]
	copy(buf[0:4], recMagic)
	buf[4] = recVersion
	buf[5] = r.mark
	binary.LittleEndian.PutUint16(buf[6:8], uint16(len(token)))
	binary.LittleEndian.PutUint64(buf[8:16], r.fence)
	binary.LittleEndian.PutUint64(buf[16:24], uint64(r.expiry))
	binary.LittleEndian.PutUint64(buf[24:32], uint64(r.liveOff))
	binary.LittleEndian.PutUint32(buf[32:36], r.pid)
	copy(buf[recHeader:], token)
	crc := crc32.Update(crc32.Checksum(buf[0:36], castagnoli), castagnoli, buf[recHeader:])
	binary.LittleEndian.PutUint32(buf[36:40], crc)
	return buf
}
