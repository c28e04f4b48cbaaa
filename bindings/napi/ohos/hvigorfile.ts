// DevEco's build script of the HAR module (the stock HAR task set).
import { harTasks } from '@ohos/hvigor-ohos-plugin';

export default {
  system: harTasks,
  plugins: []
}
