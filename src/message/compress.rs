//! Body (de)compression with an output cap.

use std::io::{Read, Write};

use super::sys_flag::CompressionType;

/// Why a body could not be decompressed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecompressError {
    /// The output would exceed the cap.
    #[error("decompressed body exceeds the cap of {cap} bytes")]
    TooLarge {
        /// The cap.
        cap: usize,
    },
    /// The compressed stream is corrupt.
    #[error("corrupt {kind:?} stream: {detail}")]
    Corrupt {
        /// Compression type.
        kind: CompressionType,
        /// What the decompressor said.
        detail: String,
    },
}

/// Decompress `input`, failing rather than producing more than `cap` bytes.
pub fn decompress(kind: CompressionType, input: &[u8], cap: usize) -> Result<Vec<u8>, DecompressError> {
    let corrupt = |e: std::io::Error| DecompressError::Corrupt { kind, detail: e.to_string() };
    // Start small: the output size is unknown and must not be trusted from the input.
    let mut out = Vec::with_capacity(input.len().saturating_mul(2).min(cap).min(1 << 20));
    // Read at most cap + 1 bytes so that "exactly cap" and "more than cap" can be told apart.
    let limit = cap as u64 + 1;
    let read = match kind {
        CompressionType::Zlib => flate2::read::ZlibDecoder::new(input).take(limit).read_to_end(&mut out),
        CompressionType::Lz4 => lz4_flex::frame::FrameDecoder::new(input).take(limit).read_to_end(&mut out),
        CompressionType::Zstd => match ruzstd::decoding::StreamingDecoder::new(input) {
            Ok(d) => d.take(limit).read_to_end(&mut out),
            Err(e) => return Err(DecompressError::Corrupt { kind, detail: e.to_string() }),
        },
    };
    read.map_err(corrupt)?;
    if out.len() > cap {
        return Err(DecompressError::TooLarge { cap });
    }
    // The buffer grew by doubling: give back a large unused tail, it would be held as long as
    // the message is.
    if out.capacity() - out.len() > out.len() / 4 {
        out.shrink_to_fit();
    }
    Ok(out)
}

/// Compress `input` (zlib level 5 as Java's default; LZ4 frame; zstd at its fastest level).
pub fn compress(kind: CompressionType, input: &[u8]) -> Vec<u8> {
    match kind {
        CompressionType::Zlib => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(5));
            // Writing into a Vec cannot fail.
            let _ = e.write_all(input);
            e.finish().unwrap_or_default()
        }
        CompressionType::Lz4 => {
            let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
            let _ = e.write_all(input);
            e.finish().unwrap_or_default()
        }
        CompressionType::Zstd => {
            ruzstd::encoding::compress_to_vec(input, ruzstd::encoding::CompressionLevel::Fastest)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_each_kind_and_cap() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        for kind in [CompressionType::Zlib, CompressionType::Lz4, CompressionType::Zstd] {
            let c = compress(kind, &data);
            assert!(c.len() < data.len(), "{kind:?} compresses");
            assert_eq!(decompress(kind, &c, data.len()).unwrap(), data);
            assert_eq!(
                decompress(kind, &c, data.len() - 1),
                Err(DecompressError::TooLarge { cap: data.len() - 1 })
            );
            assert!(matches!(
                decompress(kind, b"garbage!garbage!", 100),
                Err(DecompressError::Corrupt { .. })
            ));
        }
    }
}
