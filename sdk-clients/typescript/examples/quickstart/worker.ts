// The quickstart's worker process: serves what workflows.ts registers.
import { worker } from "./workflows.js";

await worker.run(); // until SIGINT/SIGTERM, or pass { signal } to stop it
