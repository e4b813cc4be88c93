//! Broadcasting's local offsets on disk.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use rocketmq_push_core::MessageQueue;
use rocketmq_push_core::protocol::body::{JsonBody, ResetOffsetBody};

/// A local offset file in Java's format (`{"offsetTable":{{"brokerName":..,"queueId":..,"topic":..}:100,…}}`,
/// what `LocalFileOffsetStore` writes), with a `.bak` copy of the previous version.
///
/// Writes go to a temporary file that is flushed and renamed over the old one, so a crash
/// mid-write leaves a whole file behind: the old one or the new one, never half of either.
#[derive(Clone, Debug)]
pub struct OffsetFile {
    path: PathBuf,
}

impl OffsetFile {
    /// The file at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// Java's default place: `~/.rocketmq_offsets/<client id>/<group>/offsets.json`.
    pub fn default_for(client_id: &str, group: &str) -> Self {
        let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
        Self::new(
            home.join(".rocketmq_offsets")
                .join(client_id.replace([':', '/'], "_"))
                .join(group)
                .join("offsets.json"),
        )
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn bak(&self) -> PathBuf {
        self.path.with_extension("json.bak")
    }

    /// The stored offsets: the file, else its `.bak`, else none. A file that does not parse is
    /// an error (the caller decides), not silently empty.
    pub fn load(&self) -> io::Result<Vec<(MessageQueue, i64)>> {
        for p in [self.path.clone(), self.bak()] {
            match fs::read(&p) {
                Ok(bytes) => match ResetOffsetBody::decode(&bytes) {
                    Ok(body) => return Ok(body.offset_table),
                    Err(e) if p == self.path => {
                        if let Ok(b) = fs::read(self.bak()) {
                            if let Ok(body) = ResetOffsetBody::decode(&b) {
                                return Ok(body.offset_table);
                            }
                        }
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("{}: {e}", p.display()),
                        ));
                    }
                    Err(e) => {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("{}: {e}", p.display()),
                        ));
                    }
                },
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(Vec::new())
    }

    /// Replace the stored offsets atomically.
    pub fn store(&self, offsets: &[(MessageQueue, i64)]) -> io::Result<()> {
        if let Some(dir) = self.path.parent() {
            fs::create_dir_all(dir)?;
        }
        let body = ResetOffsetBody { offset_table: offsets.to_vec() }.encode();
        let tmp = self.path.with_extension("json.tmp");
        {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(&body)?;
            f.sync_all()?;
        }
        if self.path.exists() {
            // Keep the previous version (Java's `.bak`); a failure here is not fatal.
            let _ = fs::copy(&self.path, self.bak());
        }
        fs::rename(&tmp, &self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "rmq-offsets-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn store_load_and_fall_back_to_bak() {
        let d = dir();
        let f = OffsetFile::new(d.join("g/offsets.json"));
        assert!(f.load().unwrap().is_empty(), "missing = empty");
        let a = vec![(MessageQueue::new("T", "b", 0), 5), (MessageQueue::new("T", "b", 1), 7)];
        f.store(&a).unwrap();
        assert_eq!(f.load().unwrap(), a);
        let b = vec![(MessageQueue::new("T", "b", 0), 9)];
        f.store(&b).unwrap();
        assert_eq!(f.load().unwrap(), b);
        // A torn main file (as a crash mid-copy would leave): the .bak is used.
        fs::write(f.path(), b"{\"offsetTable\":{{\"broker").unwrap();
        assert_eq!(f.load().unwrap(), a);
        let text = fs::read_to_string(f.bak()).unwrap();
        assert!(text.starts_with("{\"offsetTable\":{{"), "Java's object-keyed format: {text}");
        let _ = fs::remove_dir_all(d);
    }
}
