/**
 * s3rver with the bench's bucket on PORT, in a process of its own so that what it holds while
 * receiving uploads is not counted in the service's RSS. Stops (and removes its data) on SIGTERM.
 */
import { startS3rver } from '../test/helpers/s3.js';

const s3 = await startS3rver({ port: Number(process.env.PORT) });
const stop = () => void s3.close().then(() => process.exit(0));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
