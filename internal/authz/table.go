package authz

import (
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/pki"
)

// The role sets of the table.
var (
	anyRole   = pki.Roles()
	adminOnly = []pki.Role{pki.RoleAdmin}
)

// Table is THE authorization table: every gRPC method of the masters (the
// services of api/proto/gin/v1 and gRPC health) → the roles that may call
// it. TestEveryMethodHasARow fails when a method has no row. docs/SECURITY.md
// prints it (TestSecurityDocTable keeps the two in step).
func Table() map[string][]pki.Role {
	return map[string][]pki.Role{
		// Agents: a session writes the node the certificate names (checked
		// in the session on its hello).
		ginv1.AgentService_Session_FullMethodName: {pki.RoleAgent},
		// Rank windows of the agent's own node (checked in the handler).
		ginv1.LiveService_ReportRanks_FullMethodName: {pki.RoleAgent},

		// Reads: every identity of the cluster.
		ginv1.TopologyService_ListNodes_FullMethodName:           anyRole,
		ginv1.TopologyService_GetNode_FullMethodName:             anyRole,
		ginv1.TopologyService_GetGraph_FullMethodName:            anyRole,
		ginv1.TopologyService_GetPath_FullMethodName:             anyRole,
		ginv1.TopologyService_GetMatrix_FullMethodName:           anyRole,
		ginv1.TopologyService_Watch_FullMethodName:               anyRole,
		ginv1.PlanService_GetPlan_FullMethodName:                 anyRole,
		ginv1.PlanService_Estimate_FullMethodName:                anyRole,
		ginv1.PlanService_OrderNodes_FullMethodName:              anyRole,
		ginv1.PlanService_Export_FullMethodName:                  anyRole,
		ginv1.CalibrationService_ListMeasurements_FullMethodName: anyRole,
		ginv1.CalibrationService_GetMeasurement_FullMethodName:   anyRole,
		ginv1.AdminService_GetClusterInfo_FullMethodName:         anyRole,
		ginv1.CheckService_Check_FullMethodName:                  anyRole,
		ginv1.LiveService_GetJobLive_FullMethodName:              anyRole,
		healthpb.Health_Check_FullMethodName:                     anyRole,
		healthpb.Health_Watch_FullMethodName:                     anyRole,
		healthpb.Health_List_FullMethodName:                      anyRole,

		// Plans: the scheduler (Slurm prolog/epilog) pins and expires them;
		// an agent pins one for a job on its node through its plan socket.
		ginv1.PlanService_GetOrCreatePlan_FullMethodName: {pki.RoleScheduler, pki.RoleAgent, pki.RoleAdmin},
		ginv1.PlanService_DeletePlan_FullMethodName:      {pki.RoleScheduler, pki.RoleAdmin},

		// Administration.
		ginv1.AdminService_ImportFabric_FullMethodName:            adminOnly,
		ginv1.AdminService_RemoveServer_FullMethodName:            adminOnly,
		ginv1.AdminService_AdmitServer_FullMethodName:             adminOnly,
		ginv1.AdminService_DeleteNode_FullMethodName:              adminOnly,
		ginv1.AdminService_DenyCertificate_FullMethodName:         adminOnly,
		ginv1.AdminService_AllowCertificate_FullMethodName:        adminOnly,
		ginv1.AdminService_ListDeniedCertificates_FullMethodName:  adminOnly,
		ginv1.CalibrationService_ImportMeasurement_FullMethodName: adminOnly,
		ginv1.CalibrationService_DeleteMeasurement_FullMethodName: adminOnly,

		// Membership: only another master joins.
		ginv1.AdminService_Join_FullMethodName: {pki.RoleMaster},

		// Relays: only another master, for the agent sessions it holds
		// (it checked each agent's certificate against the node).
		ginv1.RelayService_PutInventory_FullMethodName:     {pki.RoleMaster},
		ginv1.RelayService_ImportFabricScan_FullMethodName: {pki.RoleMaster},
		ginv1.RelayService_ReportSessions_FullMethodName:   {pki.RoleMaster},
	}
}
