package raft

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	hraft "github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"

	"github.com/gin-topology/gin/internal/state"
)

// ErrNoState: a data dir to recover holds no Raft state.
var ErrNoState = errors.New("no Raft state to recover")

// MaxRecoverPeers bounds the extra voters of a recovered configuration.
const MaxRecoverPeers = 8

// CheckRecoverable refuses a data dir that cannot hold Raft state (missing,
// or without a wal/ directory holding segment files). It reads only; it
// runs before anything is created, so a wrong --data-dir changes nothing.
func CheckRecoverable(dataDir string) error {
	fi, err := os.Stat(dataDir)
	if err != nil {
		return fmt.Errorf("raft: recover: %w: data dir: %w", ErrNoState, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("raft: recover: %w: %s is not a directory", ErrNoState, dataDir)
	}
	walDir := filepath.Join(dataDir, "wal")
	entries, err := os.ReadDir(walDir)
	if err != nil {
		return fmt.Errorf("raft: recover: %w: %s has no Raft log (%w); point --data-dir at the data dir of a master that was in the cluster", ErrNoState, dataDir, err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".wal") {
			return nil
		}
	}
	return fmt.Errorf("raft: recover: %w: %s holds no log segment", ErrNoState, walDir)
}

// ParseRecoverPeers parses --recover-peers: "id=host:port,..." (Raft
// addresses). Ids are checked like server ids; duplicates and self are
// refused by recoverConfiguration.
func ParseRecoverPeers(s string) ([]Member, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > MaxRecoverPeers {
		return nil, fmt.Errorf("%d peers: want at most %d", len(parts), MaxRecoverPeers)
	}
	var out []Member
	for _, p := range parts {
		id, addr, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || addr == "" {
			return nil, fmt.Errorf("%q: want id=host:port", p)
		}
		if err := ValidateServerID(id); err != nil {
			return nil, fmt.Errorf("%q: %w", p, err)
		}
		if err := validHostPort(addr); err != nil {
			return nil, fmt.Errorf("%q: %w", p, err)
		}
		out = append(out, Member{ID: id, Address: addr, Voter: true})
	}
	return out, nil
}

// recoverConfiguration is self plus peers, every one a voter; ids and
// addresses must be distinct.
func recoverConfiguration(self hraft.Server, peers []Member) (hraft.Configuration, error) {
	conf := hraft.Configuration{Servers: []hraft.Server{self}}
	for _, p := range peers {
		for _, s := range conf.Servers {
			if string(s.ID) == p.ID {
				return hraft.Configuration{}, fmt.Errorf("recover peer id %q appears twice (this server's own id is added by itself)", p.ID)
			}
			if string(s.Address) == p.Address {
				return hraft.Configuration{}, fmt.Errorf("recover peer address %s appears twice", p.Address)
			}
		}
		conf.Servers = append(conf.Servers, serverOf(p))
	}
	return conf, nil
}

// recoverCluster rewrites the stored configuration (RecoverCluster replays
// the log into a throw-away FSM, writes a snapshot holding the new
// configuration and compacts the log), logging loudly what it did.
func recoverCluster(cfg Config, rc *hraft.Config, logs *wal.WAL, snaps hraft.SnapshotStore, trans hraft.Transport, log *slog.Logger) error {
	self := hraft.Server{Suffrage: hraft.Voter, ID: rc.LocalID, Address: trans.LocalAddr()}
	conf, err := recoverConfiguration(self, cfg.RecoverPeers)
	if err != nil {
		return fmt.Errorf("raft: recover: %w", err)
	}
	last, _ := logs.LastIndex()
	scratch := NewFSM(state.New(log), log) // discarded: Raft restores the real FSM from the new snapshot
	if err := hraft.RecoverCluster(rc, scratch, logs, logs, snaps, trans, conf); err != nil {
		return fmt.Errorf("raft: recover %s: %w", cfg.DataDir, err)
	}
	var voters []string
	for _, s := range conf.Servers {
		voters = append(voters, fmt.Sprintf("%s=%s", s.ID, s.Address))
	}
	log.Warn("RECOVERED: the Raft configuration in the data dir was rewritten; every entry of the local log is now committed. "+
		"Wipe the data dirs of every other former master before it starts again, and let them rejoin with --join",
		"data_dir", cfg.DataDir, "voters", strings.Join(voters, ","), "last_log_index", last)
	return nil
}

// validHostPort checks a host:port with a non-empty host and a port 1..65535.
func validHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "" {
		return errors.New("host is empty")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q: want 1..65535", port)
	}
	return nil
}

func serverOf(m Member) hraft.Server {
	s := hraft.Server{Suffrage: hraft.Voter, ID: hraft.ServerID(m.ID), Address: hraft.ServerAddress(m.Address)}
	if !m.Voter {
		s.Suffrage = hraft.Nonvoter
	}
	return s
}
