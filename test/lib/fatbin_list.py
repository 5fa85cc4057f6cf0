"""Lists the CUDA fatbins in an executable's .nv_fatbin section, like
`cuobjdump --list-elf --list-ptx` (which the build machines' toolkit lacks):
one line per image, `elf sm_90 <bytes>` or `ptx sm_80 <bytes>`.
`--scan` lists every fatbin anywhere in the file instead (the runtime
embeds its attention kernels' fatbin as data, not in .nv_fatbin).

A fatbin is a 16-byte header (magic 0xBA55ED50, version, header size,
payload size) followed by images, each a header (kind 1 = PTX, 2 = ELF,
header size, payload size, at offset 28 the architecture as 10 * major +
minor) and its payload. An ELF payload must start with the ELF magic, so a
misread layout fails here rather than listing garbage.
"""
import struct
import sys

FATBIN_MAGIC = 0xBA55ED50
KINDS = {1: "ptx", 2: "elf"}


def nv_fatbin_section(path):
    data = open(path, "rb").read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        sys.exit(f"{path}: not a 64-bit ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = []
    for i in range(shnum):
        name, _, _, _, off, size = struct.unpack_from(
            "<IIQQQQ", data, shoff + i * shentsize)
        sections.append((name, off, size))
    stroff = sections[shstrndx][1]
    for name, off, size in sections:
        end = data.index(b"\0", stroff + name)
        if data[stroff + name:end] == b".nv_fatbin":
            return data[off:off + size]
    sys.exit(f"{path}: no .nv_fatbin section")


def main():
    scan = sys.argv[1] == "--scan"
    path = sys.argv[2] if scan else sys.argv[1]
    blob = open(path, "rb").read() if scan else nv_fatbin_section(path)
    pos, count = 0, 0
    while pos + 16 <= len(blob):
        if scan:
            pos = blob.find(struct.pack("<I", FATBIN_MAGIC), pos)
            if pos < 0:
                break
        magic, _, header, size = struct.unpack_from("<IHHQ", blob, pos)
        if magic != FATBIN_MAGIC:
            # Fatbins are 8-byte aligned inside the section.
            pos += 8
            continue
        image, end = pos + header, pos + header + size
        while image < end:
            kind, _, ihead, isize = struct.unpack_from("<HHIQ", blob, image)
            arch, = struct.unpack_from("<I", blob, image + 28)
            payload = blob[image + ihead:image + ihead + isize]
            if kind not in KINDS:
                sys.exit(f"unknown fatbin image kind {kind}")
            if kind == 2 and payload[:4] != b"\x7fELF":
                sys.exit("an ELF image without the ELF magic")
            print(f"{KINDS[kind]} sm_{arch} {isize}")
            image += ihead + isize
        count += 1
        pos = end
    print(f"fatbins: {count}")


if __name__ == "__main__":
    main()
