//! Who is on the other end of a request's TCP connection: the process that owns the socket
//! (`/proc/net/tcp*` gives its inode, `/proc/*/fd` the process), and whether it runs inside
//! a session (an agent must not answer its own question through the board).

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The variable spex puts in every session it starts (see `runtime::start`).
const SESSION_VAR: &[u8] = b"SPEX_SESSION_ID=";

/// The process owning the client end of the connection `peer` -> `local`, when it runs on
/// this machine under a user whose `/proc` entries this process can read.
pub fn process_of(peer: SocketAddr, local: SocketAddr) -> Option<u32> {
    let inode = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|f| fs_err::read_to_string(f).ok())
        .find_map(|table| inode_in(&table, peer, local))?;
    let wanted = format!("socket:[{inode}]");
    for entry in fs_err::read_dir("/proc").ok()?.filter_map(Result::ok) {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = fs_err::read_dir(entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.filter_map(Result::ok) {
            if fs_err::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == wanted.as_str()) {
                return Some(pid);
            }
        }
    }
    None
}

/// The inode of the socket whose local end is `peer` and remote end `local`, in one
/// `/proc/net/tcp*` table.
pub fn inode_in(table: &str, peer: SocketAddr, local: SocketAddr) -> Option<u64> {
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (mine, theirs, inode) = (f.get(1)?, f.get(2)?, f.get(9)?);
        (same(parse_addr(mine)?, peer) && same(parse_addr(theirs)?, local))
            .then(|| inode.parse().ok())
            .flatten()
    })
}

/// Equal addresses, an IPv4 one and its IPv6-mapped form counted as the same.
fn same(a: SocketAddr, b: SocketAddr) -> bool {
    let canon = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 @ IpAddr::V4(_) => v4,
    };
    a.port() == b.port() && canon(a.ip()) == canon(b.ip())
}

/// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6), each 32-bit word in the
/// machine's byte order as the kernel prints it.
fn parse_addr(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let words: Vec<u32> = (0..ip.len() / 8)
        .map(|i| u32::from_str_radix(ip.get(i * 8..i * 8 + 8)?, 16).ok())
        .collect::<Option<_>>()?;
    let ip = match words.as_slice() {
        [w] => IpAddr::V4(Ipv4Addr::from(w.to_ne_bytes())),
        [a, b, c, d] => {
            let mut bytes = [0u8; 16];
            for (i, w) in [a, b, c, d].iter().enumerate() {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&w.to_ne_bytes());
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// Why process `pid` counts as inside a session: it or one of its ancestors is one of the
/// `sessions`' recorded processes (harnesses, their hosts), or carries a session's variable.
pub fn inside_session(pid: u32, sessions: &HashSet<u32>) -> Option<String> {
    let mut cur = Some(pid);
    let mut seen = 0;
    while let Some(p) = cur {
        if sessions.contains(&p) {
            return Some(format!("process {pid} runs under session process {p}"));
        }
        let environ = fs_err::read(format!("/proc/{p}/environ")).unwrap_or_default();
        if environ
            .split(|b| *b == 0)
            .any(|kv| kv.starts_with(SESSION_VAR) && kv.len() > SESSION_VAR.len())
        {
            return Some(format!("process {p} (of {pid}) runs in a spex session"));
        }
        seen += 1;
        if seen > 256 {
            break;
        }
        cur = crate::seam::evidence::parent_of(p);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_table_is_read() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:D431 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 424242 1 0000000000000000 20 4 30 10 -1\n";
        let peer: SocketAddr = "127.0.0.1:54321".parse().unwrap();
        let local: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        if cfg!(target_endian = "little") {
            assert_eq!(inode_in(table, peer, local), Some(424_242));
            assert_eq!(inode_in(table, local, peer), None);
        }
    }

    #[test]
    fn this_process_is_found_behind_its_own_connection() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_server, peer) = listener.accept().unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        assert_eq!(
            process_of(peer, listener.local_addr().unwrap()),
            Some(std::process::id())
        );
        let mine: HashSet<u32> = [std::process::id()].into();
        assert!(inside_session(std::process::id(), &mine).is_some());
    }
}
