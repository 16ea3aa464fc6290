package faulttest

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/gin-topology/gin/internal/masteraddr"
)

// The round that kills the master holding agents (issue #16: agents attach
// to any master, spread by their node name). Its agents must reattach to
// another master without re-sending an inventory, and no node may be
// marked DOWN: the leader gives the nodes of a master whose reports stopped
// the reattach grace.

// agentMasterLine is the agent's log line for an established session.
var agentMasterLine = regexp.MustCompile(`msg="connected to master".*? master=(\S+)`)

// agentMasters is the master each agent's latest session is with (its
// address), from the agents' logs.
func agentMasters(c *cluster) map[string]string {
	out := map[string]string{}
	for _, a := range c.agents {
		b, _ := os.ReadFile(a.Log)
		if m := agentMasterLine.FindAllStringSubmatch(string(b), -1); len(m) > 0 {
			out[a.Name] = m[len(m)-1][1]
		}
	}
	return out
}

// inventoriesSent counts the inventories every agent has sent so far.
func inventoriesSent(c *cluster) int {
	n := 0
	for _, a := range c.agents {
		n += logCount(a, `msg="inventory sent"`)
	}
	return n
}

// downMarks counts the nodes the masters' liveness has marked DOWN so far.
func downMarks(c *cluster) int {
	n := 0
	for _, p := range c.masters {
		b, _ := os.ReadFile(p.Log)
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, `msg="node state changed"`) && strings.Contains(line, "NODE_STATE_DOWN") {
				n++
			}
		}
	}
	return n
}

// killAgentsMaster kills -9 the master that holds the most agent sessions
// (a follower when one holds any: the leader's death has its own rounds),
// waits until its agents hold sessions with other masters, keeps it down
// for hold but at least past the reattach grace and the missed heartbeats
// (--heartbeat-interval 1s: max(4 s, 10 s) + 3 s), restarts it, and checks
// that every agent returns to its home master (the hash share of each),
// that no inventory was re-sent and no node was marked DOWN.
func killAgentsMaster(c *cluster, leader int, hold time.Duration) (string, error) {
	on := agentMasters(c)
	held := make([][]string, len(c.masters))
	for a, addr := range on {
		for i, m := range c.addrs {
			if m == addr {
				held[i] = append(held[i], a)
			}
		}
	}
	victim := -1
	for i := range c.masters {
		if len(held[i]) == 0 {
			continue
		}
		better := victim < 0 || len(held[i]) > len(held[victim]) ||
			len(held[i]) == len(held[victim]) && victim == leader
		if better {
			victim = i
		}
	}
	if victim < 0 {
		return "", fmt.Errorf("no master holds an agent session (agents' masters: %v)", on)
	}
	sent, downs := inventoriesSent(c), downMarks(c)
	start := time.Now()
	p := c.masters[victim]
	if !p.Kill(killWait) {
		return "", fmt.Errorf("%s survived SIGKILL for %s", p.Name, killWait)
	}
	if err := waitFor("the agents of the killed master on other masters", 60*time.Second, func() (bool, string) {
		now := agentMasters(c)
		for _, a := range held[victim] {
			if now[a] == c.addrs[victim] {
				return false, a + " has not reattached"
			}
		}
		return true, ""
	}); err != nil {
		return "", err
	}
	reattached := time.Since(start)
	time.Sleep(max(hold, 14*time.Second-time.Since(start)))
	if err := p.Start(); err != nil {
		return "", fmt.Errorf("restart %s: %v", p.Name, err)
	}
	if n := inventoriesSent(c) - sent; n != 0 {
		return "", fmt.Errorf("agents re-sent %d inventories after %s died", n, p.Name)
	}
	// Once it takes sessions again, the agents whose home it is return
	// (--home-probe-interval 2s): every master holds its hash share.
	if err := waitFor("every agent back at its home master", 60*time.Second, func() (bool, string) {
		now := agentMasters(c)
		for _, a := range c.agents {
			if home := masteraddr.Home(a.Name, c.addrs); now[a.Name] != home {
				return false, fmt.Sprintf("%s on %s, its home is %s", a.Name, now[a.Name], home)
			}
		}
		return true, ""
	}); err != nil {
		return "", err
	}
	returned := time.Since(start)
	if n := inventoriesSent(c) - sent; n != 0 {
		return "", fmt.Errorf("agents re-sent %d inventories after %s died and came back", n, p.Name)
	}
	if n := downMarks(c) - downs; n != 0 {
		return "", fmt.Errorf("%d nodes marked DOWN after %s died (its agents reattached after %s)", n, p.Name, reattached.Round(time.Millisecond))
	}
	role := "follower"
	if victim == leader {
		role = "leader"
	}
	return fmt.Sprintf("kill -9 %s m%d holding agents %v; they reattached after %s, none re-sent, none marked DOWN; restarted, every agent at its home after %s",
		role, victim+1, held[victim], reattached.Round(time.Millisecond), returned.Round(time.Millisecond)), nil
}
