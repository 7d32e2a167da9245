//! Sessions held open through a scenario: a WebSocket opened before the first
//! change, a message exchanged on it after each change and once at the end.
//!
//! ```text
//!   WebSocket::open ─► GET <path>, upgrade: websocket ─► 101 (else an error)
//!   exchange(i)     ─► a masked text frame "<i>" ─► the same bytes back?
//!                      no (EOF, reset, other bytes, 5 s) ─► closed, for good
//! ```
//!
//! The backend echoes bytes ([`Backend`](crate::live::Backend)); Envoy relays
//! them after the 101 without reading frames, so the bytes coming back are the
//! proof that the stream, through Envoy, is still the one opened.

use std::io::{BufRead, BufReader, Read, Write};

use super::Target;
use super::stream::{Stream, connect};

/// What happened to a session: exchanges tried and answered, and whether it
/// was still open at the end.
#[derive(Debug, Clone, Default)]
pub struct SessionTally {
    pub name: String,
    pub exchanges: u32,
    pub answered: u32,
    pub open: bool,
}

/// A WebSocket through Envoy (HTTP/1.1 upgrade, plain or TLS as the target).
pub struct WebSocket {
    conn: Option<BufReader<Stream>>,
    tally: SessionTally,
}

impl WebSocket {
    /// The upgrade of `GET <path>` on `target`, answered 101.
    pub fn open(target: &Target, path: &str) -> std::io::Result<WebSocket> {
        let (mut conn, _) = connect(target)?;
        let head = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nupgrade: websocket\r\nconnection: Upgrade\r\n\
             sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\n\r\n",
            target.host
        );
        conn.get_mut().write_all(head.as_bytes())?;
        conn.get_mut().flush()?;
        let answer = read_head(&mut conn)?;
        if !answer.starts_with("HTTP/1.1 101") {
            return Err(std::io::Error::other(format!("no upgrade: {answer}")));
        }
        let tally = SessionTally {
            name: "websocket".into(),
            open: true,
            ..SessionTally::default()
        };
        Ok(WebSocket {
            conn: Some(conn),
            tally,
        })
    }

    /// Sends message `i` and reads it back; false (and closed from then on)
    /// when it does not come back.
    pub fn exchange(&mut self, i: usize) -> bool {
        self.tally.exchanges += 1;
        let Some(conn) = self.conn.as_mut() else {
            return false;
        };
        let frame = text_frame(&i.to_string());
        let mut back = vec![0u8; frame.len()];
        let ok = conn.get_mut().write_all(&frame).is_ok()
            && conn.get_mut().flush().is_ok()
            && conn.read_exact(&mut back).is_ok()
            && back == frame;
        if ok {
            self.tally.answered += 1;
        } else {
            self.conn = None;
            self.tally.open = false;
        }
        ok
    }

    pub fn tally(&self) -> SessionTally {
        self.tally.clone()
    }
}

/// A client's text frame (FIN, opcode 1, masked as a client must), `text` < 126 bytes.
fn text_frame(text: &str) -> Vec<u8> {
    let mask = [0x11u8, 0x22, 0x33, 0x44];
    let mut frame = vec![0x81, 0x80 | text.len() as u8];
    frame.extend(mask);
    frame.extend(text.bytes().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    frame
}

/// The response head, up to its blank line.
fn read_head(conn: &mut BufReader<Stream>) -> std::io::Result<String> {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if conn.read_line(&mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        if line == "\r\n" {
            return Ok(head);
        }
        head.push_str(&line);
    }
}
