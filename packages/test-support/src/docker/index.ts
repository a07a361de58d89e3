export { LocalDocker, type DockerRuntime, type LocalDockerOptions } from './local-docker.js';
