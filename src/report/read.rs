//! Reading a report file: race by race (memory bounded by the largest race), bounded in
//! size, its schema version checked, its fields this streamsan does not know kept.

use std::cell::RefCell;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::{RaceKind, RaceReport, Report, SCHEMA};

/// The largest report file read: beyond it (`/dev/zero`, a file that keeps growing) reading
/// stops with an error.
pub const MAX_REPORT_BYTES: u64 = 16 << 30;

/// Reads the report at `path`, handing each race to `on_race` as it is read; returns the
/// rest of the report (its `races` empty). Errors are `InvalidData` with the reason.
pub fn each_race(path: &Path, limit: u64, on_race: &mut dyn FnMut(RaceReport) -> io::Result<()>) -> io::Result<Report> {
    let file = File::open(path)?;
    let failure = RefCell::new(None);
    let reader = Bounded { inner: file, left: limit, limit, failure: &failure };
    let mut json = serde_json::Deserializer::from_reader(BufReader::with_capacity(1 << 16, reader));
    let header = json
        .deserialize_map(ReportVisitor { on_race, failure: &failure })
        .and_then(|header| json.end().map(|()| header));
    if let Some(e) = failure.take() {
        return Err(e);
    }
    let header = header.map_err(|e| invalid(format!("not a streamsan report ({e})")))?;
    serde_json::from_value(Value::Object(header)).map_err(|e| invalid(format!("not a streamsan report ({e})")))
}

fn invalid(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}

/// A file read up to a limit; what stops the reading is kept in `failure`.
struct Bounded<'a> {
    inner: File,
    left: u64,
    limit: u64,
    failure: &'a RefCell<Option<io::Error>>,
}

impl Read for Bounded<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            let why = format!("larger than {} bytes: not a report streamsan reads", self.limit);
            *self.failure.borrow_mut() = Some(invalid(why.clone()));
            return Err(invalid(why));
        }
        let room = buf.len().min(self.left as usize);
        let n = self.inner.read(&mut buf[..room])?;
        self.left -= n as u64;
        Ok(n)
    }
}

struct ReportVisitor<'a, 'f> {
    on_race: &'a mut dyn FnMut(RaceReport) -> io::Result<()>,
    failure: &'f RefCell<Option<io::Error>>,
}

impl<'de> Visitor<'de> for ReportVisitor<'_, '_> {
    type Value = Map<String, Value>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut header = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == "races" {
                map.next_value_seed(Races { header: &header, on_race: &mut *self.on_race, failure: self.failure })?;
                continue;
            }
            let value: Value = map.next_value()?;
            let fail = |why: String| {
                *self.failure.borrow_mut() = Some(invalid(why.clone()));
                A::Error::custom(why)
            };
            match (key.as_str(), &value) {
                ("tool", tool) if tool != "streamsan" => return Err(fail(format!("not a streamsan report (tool {tool})"))),
                ("schema", schema) if schema.as_u64().is_none_or(|s| s > SCHEMA as u64) => {
                    return Err(fail(format!(
                        "written by a newer streamsan ({}, report schema {schema}); streamsan {} reads schema {SCHEMA} and older",
                        version_of(&header),
                        env!("CARGO_PKG_VERSION")
                    )))
                }
                _ => {}
            }
            header.insert(key, value);
        }
        Ok(header)
    }
}

fn version_of(header: &Map<String, Value>) -> String {
    match header.get("version").and_then(Value::as_str) {
        Some(version) => format!("version {version}"),
        None => "version unknown".to_string(),
    }
}

/// The `races` array, handed on race by race.
struct Races<'a, 'f> {
    header: &'a Map<String, Value>,
    on_race: &'a mut dyn FnMut(RaceReport) -> io::Result<()>,
    failure: &'f RefCell<Option<io::Error>>,
}

impl<'de> DeserializeSeed<'de> for Races<'_, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Races<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an array of races")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(value) = seq.next_element::<Value>()? {
            let kind = value.get("kind").and_then(Value::as_str).unwrap_or_default().to_string();
            let race = match serde_json::from_value::<RaceReport>(value) {
                Ok(race) => race,
                Err(_) if kind.parse::<RaceKind>().is_err() => {
                    let why = format!(
                        "a race of kind {kind:?}, unknown to streamsan {}: the report was written by another streamsan ({})",
                        env!("CARGO_PKG_VERSION"),
                        version_of(self.header)
                    );
                    *self.failure.borrow_mut() = Some(invalid(why.clone()));
                    return Err(A::Error::custom(why));
                }
                Err(e) => return Err(A::Error::custom(e)),
            };
            if let Err(e) = (self.on_race)(race) {
                let why = e.to_string();
                *self.failure.borrow_mut() = Some(e);
                return Err(A::Error::custom(why));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> String {
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/report/examples/cross-stream-raw.json"))
            .unwrap()
    }

    fn file(name: &str, text: &str) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("streamsan-read-{name}-{}.json", std::process::id()));
        std::fs::write(&path, text).unwrap();
        path
    }

    fn error_of(name: &str, text: &str, limit: u64) -> String {
        let path = file(name, text);
        let e = each_race(&path, limit, &mut |_| Ok(())).unwrap_err();
        std::fs::remove_file(path).unwrap();
        e.to_string()
    }

    #[test]
    fn a_newer_schema_or_race_kind_says_so() {
        let newer = example().replacen("\"pid\"", "\"schema\": 2, \"pid\"", 1);
        let e = error_of("schema", &newer, MAX_REPORT_BYTES);
        assert!(e.starts_with("written by a newer streamsan (version "), "{e}");
        assert!(e.contains("reads schema 1 and older"), "{e}");
        let kind = example().replace("\"cross-stream-race\"", "\"tensor-race\"");
        let e = error_of("kind", &kind, MAX_REPORT_BYTES);
        assert!(e.starts_with("a race of kind \"tensor-race\", unknown to streamsan"), "{e}");
    }

    #[test]
    fn reading_stops_at_the_bound() {
        let e = error_of("bound", &" ".repeat(1000), 100);
        assert!(e.starts_with("larger than 100 bytes"), "{e}");
        let e = each_race(Path::new("/dev/zero"), MAX_REPORT_BYTES, &mut |_| Ok(())).unwrap_err();
        assert!(e.to_string().contains("not a streamsan report"), "{e}");
    }

    /// Fields this streamsan does not know are kept, and the file's version too.
    #[test]
    fn unknown_fields_and_the_version_are_kept() {
        let text = example().replacen("\"pid\"", "\"gpu\": {\"name\": \"H200\"}, \"pid\"", 1).replacen(
            &format!("\"version\": \"{}\"", env!("CARGO_PKG_VERSION")),
            "\"version\": \"0.0.1\"",
            1,
        );
        let path = file("unknown", &text);
        let mut races = 0;
        let report = each_race(&path, MAX_REPORT_BYTES, &mut |_| {
            races += 1;
            Ok(())
        })
        .unwrap();
        std::fs::remove_file(path).unwrap();
        assert_eq!(races, 1);
        assert_eq!(report.version, "0.0.1");
        let written = serde_json::to_value(&report).unwrap();
        assert_eq!(written["gpu"]["name"], "H200");
        assert_eq!(written["schema"], 1);
    }
}
