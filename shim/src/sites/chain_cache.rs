//! The native call chains a thread unwound, remembered as the return addresses they left on
//! its stack, so that the next capture from the same place reads them instead of unwinding:
//! a trie by anchor and slot, whose lookup reads each slot once, neither allocating nor
//! locking.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use streamsan::hash::FastHasher;
use streamsan::model::op::StackId;

/// Words a trie holds before it starts over (a megabyte): several thousand chains of forty
/// frames, however they share their frames.
const TRIE_WORDS: usize = 1 << 17;

/// A run word: the return address in the low bits (user-space addresses on x86-64 fit in
/// 47), the slot's distance above the anchor, in words, in the high 17 (a megabyte of stack:
/// a chain that spans more is unwound every time).
const VALUE_BITS: u32 = 47;
const VALUE_MASK: u64 = (1 << VALUE_BITS) - 1;
const MAX_OFFSET: u64 = (1 << (64 - VALUE_BITS)) - 1;

/// A node's header, followed by its run: `[run length | id, fork offset | fork key, first
/// way's node | second way's node, first way's return address, second way's]`. A fork offset
/// of 0 marks a node where its chains end (no slot is at the anchor itself); `NONE`, a way
/// not taken yet. Ways after the second are in [`ChainTrie::more`] by the fork's key, which
/// moves with the fork when a node is split.
const HEADER: usize = 5;
const NONE: u32 = u32::MAX;
const NO_WAYS: u64 = u64::MAX;

/// One thread's remembered chains, those whose capture ends at `backtrace_depth` apart from
/// those that end at the interpreter ([`super::stack`] keeps one trie of each).
#[derive(Default)]
pub struct ChainTrie {
    /// The node where each anchor's chains start.
    roots: HashMap<usize, u32, BuildHasherDefault<FastHasher>>,
    /// The nodes, each its header then its run, in the order they were made.
    words: Vec<u64>,
    /// A fork's ways after its second: (fork key, return address) -> node.
    more: HashMap<(u32, u64), u32, BuildHasherDefault<FastHasher>>,
    /// Fork keys handed out.
    forks: u32,
}

/// The word at a return-address slot.
///
/// # Safety
/// The slot held a return address of a chain that matched the stack up to it, above the
/// capture's frame, which is at the same address: this thread's live stack.
#[inline]
unsafe fn read_slot(base: usize, offset: u64) -> u64 {
    unsafe { core::ptr::read_volatile((base + offset as usize * 8) as *const u64) }
}

/// The slots are counted from the anchor's word.
fn base(anchor: usize) -> usize {
    anchor & !7
}

fn low(word: u64) -> u32 {
    word as u32
}

fn high(word: u64) -> u32 {
    (word >> 32) as u32
}

fn pair(high: u32, low: u32) -> u64 {
    (high as u64) << 32 | low as u64
}

impl ChainTrie {
    /// The id of the chain on the stack above the capture's frame at `anchor`, if remembered.
    /// Not inlined: its loop keeps its registers, none spilled for the capture's.
    #[inline(never)]
    pub fn find(&self, anchor: usize) -> Option<StackId> {
        let base = base(anchor);
        let mut at = *self.roots.get(&anchor)? as usize;
        loop {
            let head = &self.words[at..at + HEADER];
            let run = &self.words[at + HEADER..at + HEADER + high(head[0]) as usize];
            // SAFETY (both reads): slots of a chain that matched the stack so far (read_slot).
            if !run.iter().all(|&w| unsafe { read_slot(base, w >> VALUE_BITS) } == w & VALUE_MASK) {
                return None;
            }
            let fork = high(head[1]);
            if fork == 0 {
                return Some(StackId(low(head[0])));
            }
            at = self.way(head, unsafe { read_slot(base, fork as u64) })? as usize;
        }
    }

    /// Remembers the chain of return `slots` (address, return address there) above the
    /// capture's frame at `anchor`, innermost first. A chain whose slots do not pack, or that
    /// contradicts a remembered one (a caller that sizes its frame at run time), is not
    /// remembered: the unwinder finds it every time.
    pub fn remember(&mut self, anchor: usize, slots: &[(usize, u64)], id: StackId) {
        let base = base(anchor);
        let mut chain = Vec::with_capacity(slots.len());
        for &(slot, value) in slots {
            let offset = (slot.wrapping_sub(base) / 8) as u64;
            if slot <= base || offset > MAX_OFFSET || value > VALUE_MASK {
                return;
            }
            chain.push(offset << VALUE_BITS | value);
        }
        if self.words.len() + chain.len() + 2 * HEADER > TRIE_WORDS {
            *self = ChainTrie::default();
        }
        let Some(&root) = self.roots.get(&anchor) else {
            let root = self.end(&chain, id);
            self.roots.insert(anchor, root);
            return;
        };
        let (mut at, mut rest) = (root as usize, &chain[..]);
        loop {
            let len = high(self.words[at]) as usize;
            let run = &self.words[at + HEADER..at + HEADER + len];
            let shared = run.iter().zip(rest).take_while(|(a, b)| a == b).count();
            if shared < len {
                // The chains part inside the run: at the same slot, else contradiction.
                let Some(&word) = rest.get(shared) else { return };
                let old = run[shared];
                if word >> VALUE_BITS != old >> VALUE_BITS {
                    return;
                }
                // The node keeps the shared part; the rest of its run, with its end or fork,
                // becomes a node after it (its words copied: the old ones stay, unread).
                let tail_run = run[shared + 1..].to_vec();
                let head: [u64; HEADER] = self.words[at..at + HEADER].try_into().expect("a header");
                let tail = self.words.len() as u32;
                self.words.push(pair(tail_run.len() as u32, low(head[0])));
                self.words.extend_from_slice(&head[1..]);
                self.words.extend_from_slice(&tail_run);
                let key = self.fork_key();
                self.words[at] = pair(shared as u32, 0);
                self.words[at + 1] = pair((old >> VALUE_BITS) as u32, key);
                self.words[at + 2] = pair(tail, NONE);
                (self.words[at + 3], self.words[at + 4]) = (old & VALUE_MASK, 0);
                let new = self.end(&rest[shared + 1..], id);
                self.link(at, word & VALUE_MASK, new);
                return;
            }
            rest = &rest[len..];
            let fork = high(self.words[at + 1]) as u64;
            match rest.first() {
                None if fork == 0 => {
                    self.words[at] = pair(len as u32, id.0);
                    return;
                }
                Some(&word) if fork != 0 && word >> VALUE_BITS == fork => {
                    match self.way(&self.words[at..at + HEADER], word & VALUE_MASK) {
                        Some(next) => (at, rest) = (next as usize, &rest[1..]),
                        None => {
                            let new = self.end(&rest[1..], id);
                            self.link(at, word & VALUE_MASK, new);
                            return;
                        }
                    }
                }
                // Ends where another goes on, or goes on elsewhere: contradiction.
                _ => return,
            }
        }
    }

    /// The node after the fork of the node whose header is `head`, where its slot holds
    /// `value`.
    #[inline(always)]
    fn way(&self, head: &[u64], value: u64) -> Option<u32> {
        let ways = head[2];
        if high(ways) != NONE && head[3] == value {
            return Some(high(ways));
        }
        if low(ways) != NONE && head[4] == value {
            return Some(low(ways));
        }
        self.further_way(low(head[1]), value)
    }

    /// A way after a fork's second: out of line, as a lookup seldom needs it.
    #[inline(never)]
    fn further_way(&self, key: u32, value: u64) -> Option<u32> {
        self.more.get(&(key, value)).copied()
    }

    /// Adds a way to the fork of the node at `at`.
    fn link(&mut self, at: usize, value: u64, node: u32) {
        let ways = self.words[at + 2];
        if high(ways) == NONE {
            (self.words[at + 2], self.words[at + 3]) = (pair(node, low(ways)), value);
        } else if low(ways) == NONE {
            (self.words[at + 2], self.words[at + 4]) = (pair(high(ways), node), value);
        } else {
            self.more.insert((low(self.words[at + 1]), value), node);
        }
    }

    fn fork_key(&mut self) -> u32 {
        self.forks += 1;
        self.forks
    }

    /// A new node where a chain ends after `run`.
    fn end(&mut self, run: &[u64], id: StackId) -> u32 {
        let at = self.words.len() as u32;
        self.words.extend_from_slice(&[pair(run.len() as u32, id.0), 0, NO_WAYS, 0, 0]);
        self.words.extend_from_slice(run);
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in stack: chains are (index of a word, return address) pairs over it, the
    /// anchor just below its first word.
    struct Words(Vec<u64>);

    impl Words {
        fn anchor(&self) -> usize {
            self.0.as_ptr() as usize - 8
        }

        fn slots(&self, chain: &[(usize, u64)]) -> Vec<(usize, u64)> {
            chain.iter().map(|&(i, v)| (&self.0[i] as *const u64 as usize, v)).collect()
        }

        fn hold(&mut self, chain: &[(usize, u64)]) {
            for &(i, v) in chain {
                self.0[i] = v;
            }
        }
    }

    #[test]
    fn a_trie_finds_each_chain_it_remembers_by_what_the_stack_holds() {
        let mut words = Words(vec![0; 16]);
        let anchor = words.anchor();
        // 64 chains that part bit by bit, from the third slot to the eighth.
        let chains: Vec<Vec<(usize, u64)>> = (0..64u64)
            .map(|c| (0..10).map(|i| (i, if (2..8).contains(&i) { 100 + (c >> (7 - i)) } else { 7 })).collect())
            .collect();
        let mut trie = ChainTrie::default();
        for (c, chain) in chains.iter().enumerate() {
            words.hold(chain);
            assert_eq!(trie.find(anchor), None, "chain {c} before it is remembered");
            trie.remember(anchor, &words.slots(chain), StackId(c as u32));
        }
        for (c, chain) in chains.iter().enumerate().rev() {
            words.hold(chain);
            assert_eq!(trie.find(anchor), Some(StackId(c as u32)));
            assert_eq!(trie.find(anchor - 8), None, "another anchor");
        }
        words.0[9] = 1;
        assert_eq!(trie.find(anchor), None, "a return address no chain has");
    }

    #[test]
    fn a_fork_of_hundreds_of_ways_finds_each() {
        let mut words = Words(vec![0; 4]);
        let anchor = words.anchor();
        let mut trie = ChainTrie::default();
        let chain = |c: u64| [(0, 7), (1, 1000 + (c * 7919) % 4096), (2, 9)];
        for c in 0..300 {
            words.hold(&chain(c));
            trie.remember(anchor, &words.slots(&chain(c)), StackId(c as u32));
        }
        for c in (0..300).rev() {
            words.hold(&chain(c));
            assert_eq!(trie.find(anchor), Some(StackId(c as u32)));
        }
    }

    #[test]
    fn a_fork_of_many_ways_moves_whole_when_its_node_is_split() {
        let mut words = Words(vec![0; 4]);
        let anchor = words.anchor();
        let mut trie = ChainTrie::default();
        let chain = |c: u64| [(0, 7), (1, 8), (2, 100 + c)];
        for c in 0..5 {
            words.hold(&chain(c));
            trie.remember(anchor, &words.slots(&chain(c)), StackId(c as u32));
        }
        // Parts from them all at the second slot: the node of the first two is split there.
        let early = [(0, 7), (1, 9), (2, 100)];
        words.hold(&early);
        trie.remember(anchor, &words.slots(&early), StackId(99));
        assert_eq!(trie.find(anchor), Some(StackId(99)));
        for c in 0..5 {
            words.hold(&chain(c));
            assert_eq!(trie.find(anchor), Some(StackId(c as u32)), "way {c} of the moved fork");
        }
    }

    #[test]
    fn a_chain_that_contradicts_a_remembered_one_is_left_to_the_unwinder() {
        let mut words = Words(vec![0; 16]);
        let anchor = words.anchor();
        let long = [(0, 1), (1, 2), (2, 3)];
        let shorter = [(0, 1), (1, 2)];
        let elsewhere = [(0, 1), (3, 2), (4, 5)];
        let mut trie = ChainTrie::default();
        words.hold(&long);
        trie.remember(anchor, &words.slots(&long), StackId(1));
        trie.remember(anchor, &words.slots(&shorter), StackId(2));
        words.hold(&elsewhere);
        trie.remember(anchor, &words.slots(&elsewhere), StackId(3));
        words.hold(&long);
        assert_eq!(trie.find(anchor), Some(StackId(1)));
    }

    #[test]
    fn a_chain_that_does_not_pack_is_not_remembered() {
        let mut words = Words(vec![0; 4]);
        let anchor = words.anchor();
        let mut trie = ChainTrie::default();
        let kernel_space = [(0, 7), (1, 1 << 60)];
        words.hold(&kernel_space);
        trie.remember(anchor, &words.slots(&kernel_space), StackId(1));
        assert_eq!(trie.find(anchor), None);
        let fits = [(0, 7), (1, 8)];
        words.hold(&fits);
        trie.remember(anchor, &words.slots(&fits), StackId(2));
        assert_eq!(trie.find(anchor), Some(StackId(2)));
    }
}
