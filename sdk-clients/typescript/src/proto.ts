// The generated wire types and services, for programs that need the raw contract
// (`import { WorkflowService } from "waymark-sdk/proto"`).

export * from "./gen/waymark/v1/types_pb.js";
export * from "./gen/waymark/v1/workflow_pb.js";
export * from "./gen/waymark/v1/worker_pb.js";
export * from "./gen/waymark/v1/queue_pb.js";
export * from "./gen/waymark/v1/schedule_pb.js";
